"""Per-row token choice for CSM: greedy (argmax, as `generate(do_sample=False)`) or sampled (temperature,
top-k, top-p as transformers' warpers, then one uniform from the row's own generator), for the backbone's
codebook 0 and the depth decoder's codebooks 1..K-1 separately. Ids the codec cannot decode (Mimi's
codebook_size and up: the vocabulary's pad/eos room) are never chosen; the reference never picks them
either (its decode would fail on them)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..sampling import NEG_INF, draw, top_k_filter, top_p_filter


@dataclass(frozen=True)
class Sampling:
    greedy: bool
    temperature: float
    top_k: int
    top_p: float


@dataclass(frozen=True)
class RowSampling:
    backbone: Sampling
    depth: Sampling


def pick(
    logits: torch.Tensor, rows: list[Sampling], gens: list[torch.Generator], codable: int
) -> torch.Tensor:
    """logits [R, V] -> tokens [R] (int64, on the logits' device)."""
    scores = logits.float()
    if codable < scores.shape[-1]:
        scores = scores.clone()
        scores[:, codable:] = NEG_INF
    greedy = torch.tensor([s.greedy for s in rows], device=scores.device)
    if bool(greedy.all()):
        return scores.argmax(-1)
    s3 = scores[:, None]
    temp = torch.tensor([1.0 if s.greedy else s.temperature for s in rows], device=scores.device)
    s3 = s3 / temp.view(-1, 1, 1)
    s3 = top_k_filter(s3, torch.tensor([0 if s.greedy else s.top_k for s in rows], device=scores.device))
    s3 = top_p_filter(s3, torch.tensor([1.0 if s.greedy else s.top_p for s in rows], device=scores.device))
    u = torch.stack([torch.rand(1, generator=g, dtype=torch.float64) for g in gens]).to(scores.device)
    return draw(s3, greedy, u)[:, 0]
