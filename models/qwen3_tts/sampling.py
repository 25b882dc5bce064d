"""Token selection exactly as the reference's HF `generate` does it, vectorised over rows.

Talker (codebook 0), in this order: repetition penalty over the row's previous c0 tokens, EOS masked
for the first `min_new` tokens, suppression of [vocab-1024, vocab) except EOS, then either argmax
(greedy still applies the three rules above) or temperature -> top-k -> top-p -> draw.
Sub-talker (residual codes): no penalty, no masks; argmax or temperature -> top-k -> top-p -> draw.

Every row has its own settings and its own uniform draws (from its request's generator), so a
request's output does not depend on which other requests share the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

NEG_INF = float("-inf")


@dataclass(frozen=True)
class RowSampling:
    """Resolved settings of one request (checkpoint defaults with the request's overrides applied)."""

    greedy: bool
    temperature: float
    top_k: int
    top_p: float
    repetition_penalty: float
    sub_greedy: bool
    sub_temperature: float
    sub_top_k: int
    sub_top_p: float


@dataclass
class BatchSampling:
    """Per-row settings as tensors [B] on the logits' device."""

    greedy: torch.Tensor  # bool
    temperature: torch.Tensor
    top_k: torch.Tensor  # int64; 0 = off
    top_p: torch.Tensor

    @classmethod
    def talker(cls, rows: list[RowSampling], device: torch.device) -> BatchSampling:
        return cls(
            torch.tensor([r.greedy for r in rows], device=device),
            torch.tensor([r.temperature for r in rows], device=device),
            torch.tensor([r.top_k for r in rows], device=device),
            torch.tensor([r.top_p for r in rows], device=device),
        )

    @classmethod
    def sub(cls, rows: list[RowSampling], device: torch.device) -> BatchSampling:
        return cls(
            torch.tensor([r.sub_greedy for r in rows], device=device),
            torch.tensor([r.sub_temperature for r in rows], device=device),
            torch.tensor([r.sub_top_k for r in rows], device=device),
            torch.tensor([r.sub_top_p for r in rows], device=device),
        )


def apply_repetition_penalty(scores: torch.Tensor, seen: torch.Tensor, penalty: torch.Tensor) -> torch.Tensor:
    """HF RepetitionPenaltyLogitsProcessor: a seen token's score s becomes s/p if s > 0 else s*p."""
    p = penalty[:, None].to(scores.dtype)
    penalised = torch.where(scores < 0, scores * p, scores / p)
    return torch.where(seen, penalised, scores)


def talker_masks(
    scores: torch.Tensor,
    seen: torch.Tensor,
    penalty: torch.Tensor,
    generated: torch.Tensor,
    eos_id: int,
    min_new: int,
    suppress: torch.Tensor,
) -> torch.Tensor:
    """The three logits processors that apply to the talker whether greedy or not.
    seen [B, V] bool (previous c0 tokens), generated [B] tokens produced so far, suppress [V] bool."""
    scores = apply_repetition_penalty(scores, seen, penalty)
    scores = scores.masked_fill(suppress[None, :], NEG_INF)
    early = generated < min_new
    if bool(early.any()):
        eos_col = scores[:, eos_id].clone()
        scores[:, eos_id] = torch.where(early, torch.full_like(eos_col, NEG_INF), eos_col)
    return scores


def warp(scores: torch.Tensor, s: BatchSampling) -> torch.Tensor:
    """temperature -> top-k -> top-p (HF warpers; top_k 0 = off, top_p 1.0 keeps everything)."""
    scores = scores / s.temperature[:, None].to(scores.dtype)
    V = scores.shape[-1]
    k = torch.where(s.top_k > 0, s.top_k.clamp(max=V), torch.full_like(s.top_k, V))
    desc = scores.sort(dim=-1, descending=True).values
    kth = desc.gather(1, (k - 1)[:, None])
    scores = scores.masked_fill(scores < kth, NEG_INF)
    # top-p as HF: sort ascending, drop tokens whose cumulative probability is <= 1 - top_p,
    # always keeping the most likely one.
    asc, idx = scores.sort(dim=-1, descending=False)
    cum = asc.softmax(dim=-1).cumsum(dim=-1)
    drop = cum <= (1 - s.top_p[:, None].to(cum.dtype))
    drop[:, -1] = False
    drop = drop & (s.top_p[:, None] < 1.0)
    remove = torch.zeros_like(drop).scatter(1, idx, drop)
    return scores.masked_fill(remove, NEG_INF)


def draw(scores: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw with one uniform per row (replaces torch.multinomial, which can only use one
    generator per call)."""
    probs = scores.float().softmax(dim=-1)
    cdf = probs.cumsum(dim=-1)
    target = (uniforms.to(cdf.device, cdf.dtype) * cdf[:, -1])[:, None]
    idx = torch.searchsorted(cdf, target, right=True).squeeze(1)
    # Never land on a zero-probability token through rounding at the top end.
    idx = idx.clamp(max=scores.shape[-1] - 1)
    bad = probs.gather(1, idx[:, None]).squeeze(1) <= 0
    if bool(bad.any()):
        idx = torch.where(bad, probs.argmax(-1), idx)
    return idx


def select(scores: torch.Tensor, s: BatchSampling, uniforms: torch.Tensor) -> torch.Tensor:
    """Greedy rows take argmax of `scores`; the others are warped and drawn."""
    greedy_ids = scores.argmax(dim=-1)
    if bool(s.greedy.all()):
        return greedy_ids
    sampled = draw(warp(scores, s), uniforms)
    return torch.where(s.greedy, greedy_ids, sampled)


def top2_margin(scores: torch.Tensor) -> torch.Tensor:
    """Difference between the best and second-best finite score per row (parity tie detection)."""
    top = scores.topk(2, dim=-1).values
    return top[:, 0] - top[:, 1]
