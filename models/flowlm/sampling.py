"""Upstream's token choice (CosyVoice 2 and 3): `ras_sampling` (repetition-aware nucleus sampling,
VALL-E 2) and the stop rule, per row.

ras: the nucleus is the most probable tokens in stable descending order, taken while their running
float32 sum is below top_p and fewer than top_k are taken; one is drawn from them (multinomial on the
unnormalised probabilities). If that token occurs `>= win_size * tau_r` times in the last `win_size`
generated tokens, it is masked and a token is drawn from the whole distribution instead. Before `min_len`
tokens, index `speech_token_size` (6561) is masked: upstream masks that index, not the EOS 6562.
Draws use the row's own torch.Generator; seeded alike they give upstream's global-RNG draws.
"""

from __future__ import annotations

import torch

from .config import LMConfig


def nucleus(probs: torch.Tensor, top_p: float, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    values, order = probs.sort(descending=True, stable=True)
    total = torch.zeros((), dtype=values.dtype)
    n = 0
    while n < min(top_k, values.numel()) and bool(total < top_p):
        total = total + values[n]
        n += 1
    return values[:n], order[:n]


def ras_sample(logp: torch.Tensor, history: list[int], cfg: LMConfig, gen: torch.Generator) -> int:
    """One token from log-probabilities logp [V] (float32, on the CPU)."""
    p, idx = nucleus(logp.softmax(dim=0), cfg.top_p, cfg.top_k)
    top = int(idx[torch.multinomial(p.clone(), 1, replacement=True, generator=gen)].item())
    recent = history[-cfg.win_size :]
    if sum(1 for t in recent if t == top) >= cfg.win_size * cfg.tau_r:
        scores = logp.clone()
        scores[top] = -float("inf")
        top = int(torch.multinomial(scores.softmax(dim=0), 1, replacement=True, generator=gen).item())
    return top


def choose(
    logp: torch.Tensor,
    history: list[int],
    step: int,
    min_len: int,
    cfg: LMConfig,
    greedy: bool,
    gen: torch.Generator,
    never_stop: bool = False,
) -> int:
    """The token of generation step `step` (0-based): upstream's `sampling_ids`. `greedy`: argmax in place
    of ras_sampling (the parity tests' mode); `never_stop`: bench rows of a fixed length."""
    scores = logp.clone()
    if step < min_len:
        scores[cfg.speech_token_size] = -float("inf")
    if never_stop:
        scores[cfg.speech_token_size :] = -float("inf")
    if greedy:
        return int(scores.argmax().item())
    return ras_sample(scores, history, cfg, gen)
