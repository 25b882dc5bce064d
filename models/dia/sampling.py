"""Dia's token selection, exactly as transformers' `DiaForConditionalGeneration.generate` orders it,
vectorised over a batch of requests (each row = one request; a CFG pair contributes its conditional
and unconditional logits to ONE row).

Order per step, on scores [R, C, V] (C channels):
  1. CFG (rows with w != 1): combined = cond + w * (cond - uncond); with a top-k (the generation
     config's `top_k`, whether sampling or not) the result is the *conditional* logits restricted to
     the top-k of the combined ones; without a top-k it is the combined logits.
  2. temperature (sampling only; it cannot change an argmax).
  3. EOS channel filter: channels >= 1 may not emit EOS/PAD/BOS, channel 0 may not emit PAD/BOS; if a
     channel's best token is EOS it is the only candidate, otherwise EOS is removed.
  4. top-k, top-p (sampling only).
  5. EOS delay pattern: once channel 0's best token is EOS (or the length limit is reached) the request
     is "ending": channel c is forced to EOS `delay[c]` steps later (the delay drain).
Then argmax (greedy) or an inverse-CDF draw from softmax(scores) with the row's own uniforms, so a
request's tokens never depend on its batch-mates.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..sampling import NEG_INF, kth_threshold, top_k_filter, top_p_filter


@dataclass(frozen=True)
class RowSampling:
    greedy: bool
    temperature: float
    top_k: int | None  # None or 0 = off (also the CFG filter's k)
    top_p: float
    guidance: float  # 1 = no CFG


def cfg_combine(
    cond: torch.Tensor, uncond: torch.Tensor, w: torch.Tensor, top_k: torch.Tensor
) -> torch.Tensor:
    """Rows [R, C, V]; w [R] (> 1); top_k [R] (0 = no filter)."""
    combined = cond + (cond - uncond) * w.view(-1, 1, 1).to(cond.dtype)
    has_k = top_k > 0
    if not bool(has_k.any()):
        return combined
    thr = kth_threshold(combined, top_k.clamp(min=1))
    filtered = cond.masked_fill(combined < thr, NEG_INF)
    return torch.where(has_k.view(-1, 1, 1), filtered, combined)


def eos_channel_filter(scores: torch.Tensor, eos: int) -> torch.Tensor:
    scores = scores.clone()
    scores[:, 1:, eos:] = NEG_INF
    scores[:, 0, eos + 1 :] = NEG_INF
    is_eos = scores.argmax(dim=-1) == eos  # [R, C]
    scores[..., :eos].masked_fill_(is_eos[..., None], NEG_INF)  # EOS is best: the only candidate
    scores[..., eos].masked_fill_(~is_eos, NEG_INF)  # otherwise EOS is out
    return scores


def eos_delay_force(
    scores: torch.Tensor, eos: int, active: torch.Tensor, countdown: torch.Tensor, reached: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """active [R] bool, countdown [R, C] int (starts at the delays), reached [R] bool (length limit).
    Returns scores, active, countdown for the next step."""
    active = active | (scores[:, 0].argmax(dim=-1) == eos) | reached
    forced = active[:, None] & (countdown == 0)
    if bool(forced.any()):
        scores = scores.clone()
        scores[forced] = NEG_INF
        row = scores[forced]
        row[:, eos] = 0.0
        scores[forced] = row
    return scores, active, countdown - active[:, None].to(countdown.dtype)


def process(
    cond: torch.Tensor,
    uncond: torch.Tensor | None,
    rows: list[RowSampling],
    eos: int,
    active: torch.Tensor,
    countdown: torch.Tensor,
    reached: torch.Tensor,
    no_eos: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """All processors in the reference order. `uncond` [R, C, V] holds each CFG row's unconditional
    logits (anything for rows with w == 1). `no_eos` [R]: bench rows that must not end on their own."""
    dev = cond.device
    scores = cond.float()
    w = torch.tensor([r.guidance for r in rows], device=dev)
    k = torch.tensor([r.top_k or 0 for r in rows], device=dev, dtype=torch.long)
    cfg = w != 1.0
    if uncond is not None and bool(cfg.any()):
        guided = cfg_combine(scores, uncond.float(), torch.where(cfg, w, torch.ones_like(w)), k)
        scores = torch.where(cfg.view(-1, 1, 1), guided, scores)
    greedy = torch.tensor([r.greedy for r in rows], device=dev)
    temp = torch.tensor([1.0 if r.greedy else r.temperature for r in rows], device=dev)
    if bool((temp != 1.0).any()):
        scores = scores / temp.view(-1, 1, 1)
    if bool(no_eos.any()):
        scores = scores.clone()
        scores[:, 0, eos] = torch.where(
            no_eos, torch.full_like(scores[:, 0, eos], NEG_INF), scores[:, 0, eos]
        )
    scores = eos_channel_filter(scores, eos)
    if not bool(greedy.all()):
        # a CFG row with a top-k already has at most k finite scores: the warper's top-k is a no-op there
        sk = torch.where(greedy | (cfg & (k > 0) & (uncond is not None)), torch.zeros_like(k), k)
        scores = top_k_filter(scores, sk)
        tp = torch.tensor([1.0 if r.greedy else r.top_p for r in rows], device=dev)
        kk = torch.where(greedy, torch.zeros_like(k), k)  # each sampled row's finite scores are <= its k
        bounded = bool(((kk > 0) | (tp >= 1.0)).all())  # every top-p row had a top-k (warper or CFG) first
        scores = top_p_filter(scores, tp, int(kk.max()) if bounded and int(kk.max()) > 0 else None)
    return eos_delay_force(scores, eos, active, countdown, reached)
