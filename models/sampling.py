"""Token selection any family's sampler is built from, vectorised over a batch of rows [R, C, V] (C
channels or codebooks): transformers' top-k and top-p warpers and an inverse-CDF draw with each row's own
uniforms, so a request's tokens never depend on its batch-mates; and the generator a request draws them
from.
"""

from __future__ import annotations

import secrets

import torch

NEG_INF = float("-inf")


def request_generator(seed: int | None) -> torch.Generator:
    """A request's own CPU generator: seeded with its seed, or with a fresh random one when it has none
    (so an unseeded request still draws from a generator no other request shares)."""
    return torch.Generator().manual_seed(seed if seed is not None else secrets.randbits(63))


def kth_threshold(scores: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """Per row of [R, C, V] the k-th largest value [R, C, 1] (k [R] >= 1, clamped to V). Entries equal to
    it are kept, like transformers' TopKLogitsWarper (ties have probability zero with float logits)."""
    V = scores.shape[-1]
    k = k.clamp(1, V)
    top = scores.topk(int(k.max()), dim=-1).values  # sorted descending; much cheaper than a full sort
    idx = (k - 1).view(-1, 1, 1).expand(-1, scores.shape[1], 1)
    return top.gather(-1, idx)


def top_k_filter(scores: torch.Tensor, top_k: torch.Tensor) -> torch.Tensor:
    on = top_k > 0
    if not bool(on.any()):
        return scores
    thr = kth_threshold(scores, top_k.clamp(min=1))
    return torch.where(on.view(-1, 1, 1), scores.masked_fill(scores < thr, NEG_INF), scores)


def top_p_filter(scores: torch.Tensor, top_p: torch.Tensor, finite_max: int | None = None) -> torch.Tensor:
    """transformers' TopPLogitsWarper. `finite_max`: no row has more finite scores than this (a top-k ran
    first), so only that many candidates need sorting: the rest are -inf and add exactly 0 to the
    ascending cumulative sum."""
    on = top_p < 1.0
    if not bool(on.any()):
        return scores
    if finite_max is not None and finite_max < scores.shape[-1]:
        vals, pos = scores.topk(finite_max, dim=-1)  # descending
        vals, pos = vals.flip(-1), pos.flip(-1)  # ascending, as the reference sorts
        cum = vals.softmax(dim=-1).cumsum(dim=-1)
        remove = cum <= (1 - top_p).view(-1, 1, 1).to(cum.dtype)
        remove[..., -1:] = False
        full = torch.zeros_like(scores, dtype=torch.bool).scatter(-1, pos, remove)
        return torch.where(on.view(-1, 1, 1), scores.masked_fill(full, NEG_INF), scores)
    srt, idx = scores.sort(dim=-1, descending=False)
    cum = srt.softmax(dim=-1).cumsum(dim=-1)
    remove = cum <= (1 - top_p).view(-1, 1, 1).to(cum.dtype)
    remove[..., -1:] = False
    remove = remove.scatter(-1, idx, remove)
    return torch.where(on.view(-1, 1, 1), scores.masked_fill(remove, NEG_INF), scores)


def draw(scores: torch.Tensor, greedy: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """scores [R, C, V]; greedy [R] bool; uniforms [R, C] float64 in [0, 1). -> tokens [R, C]."""
    best = scores.argmax(dim=-1)
    if bool(greedy.all()):
        return best
    probs = scores.double().softmax(dim=-1)
    cdf = probs.cumsum(dim=-1)
    target = uniforms[..., None] * cdf[..., -1:]
    picked = (cdf <= target).sum(dim=-1).clamp(max=scores.shape[-1] - 1)
    # never land on a zero-probability token through rounding at the top of the CDF
    ok = probs.gather(-1, picked[..., None])[..., 0] > 0
    picked = torch.where(ok, picked, best)
    return torch.where(greedy[:, None], best, picked)
