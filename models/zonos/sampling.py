"""Zonos' token choice per step, as the reference makes it: classifier-free guidance on float32 logits
(uncond + (cond - uncond) * w), the pad column excluded, only codebook 0 may say EOS (decode steps), a
repetition penalty over the last `window` delayed input columns (decode steps; it divides a positive logit
and multiplies a non-positive one by penalty^count, and applies at temperature 0 too), then argmax
(temperature 0) or softmax(logits / T) narrowed by top-p, top-k and min-p and drawn with exponential noise
(argmax(p / q), q ~ Exp(1)): one [9, 1026] draw per request and step from the request's own generator, which
is
what the reference draws from torch's global generator for a single request.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..base import InputError, SamplingParams
from .config import CODE_VOCAB

DEFAULT_MIN_P = 0.1  # the reference's generate(sampling_params=dict(min_p=0.1))
DEFAULT_PENALTY = 3.0
DEFAULT_WINDOW = 2


@dataclass(frozen=True)
class RowSampling:
    temperature: float  # 0 = argmax
    top_p: float
    top_k: int
    min_p: float
    penalty: float
    window: int


def resolve(params: SamplingParams, min_p: float | None, window: int | None) -> RowSampling:
    temperature = 0.0 if params.greedy else (1.0 if params.temperature is None else params.temperature)
    if temperature < 0:
        raise InputError(f"temperature must be >= 0, got {temperature}")
    return RowSampling(
        temperature=temperature,
        top_p=params.top_p or 0.0,
        top_k=params.top_k or 0,
        min_p=DEFAULT_MIN_P if min_p is None else min_p,
        penalty=DEFAULT_PENALTY if params.repetition_penalty is None else params.repetition_penalty,
        window=DEFAULT_WINDOW if window is None else window,
    )


def guide(cond: torch.Tensor, uncond: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """[B, 9, V] float32 guided logits; `scale` [B] (one w per request)."""
    out = uncond + (cond - uncond) * scale[:, None, None]
    out[..., CODE_VOCAB - 1 :] = -torch.inf
    return out


def penalize(logits: torch.Tensor, recent: torch.Tensor, penalty: float) -> torch.Tensor:
    """One row: logits [9, V]; recent [9, window] delayed input tokens."""
    factors = torch.ones_like(logits).scatter_reduce(
        1, recent.clamp_max(logits.shape[-1] - 1).long(), torch.full_like(logits, penalty), reduce="prod"
    )
    return torch.where(logits <= 0, logits * factors, logits / factors)


def choose(logits: torch.Tensor, s: RowSampling, gen: torch.Generator) -> torch.Tensor:
    """One row's tokens [9] from its final logits [9, V] (draws from `gen` only when sampling)."""
    if s.temperature <= 0:
        return logits.argmax(dim=-1)
    probs = torch.softmax(logits / s.temperature, dim=-1)
    if s.top_p > 0:
        ordered, order = probs.sort(dim=-1, descending=True)
        drop = ordered.cumsum(dim=-1) - ordered > s.top_p
        ordered = ordered * (~drop).float()
        probs = probs.scatter(-1, order, ordered)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    if s.top_k > 0:
        kth = probs.topk(min(s.top_k, probs.shape[-1])).values[..., -1:]
        probs = torch.where(probs < kth, 0.0, probs)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    if s.min_p > 0:
        top = probs.max(dim=-1, keepdim=True).values
        probs = probs.masked_fill(probs < s.min_p * top, 0.0)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    q = torch.empty((1, *probs.shape), dtype=probs.dtype).exponential_(1, generator=gen)[0]
    return (probs / q.to(probs.device)).argmax(dim=-1)
