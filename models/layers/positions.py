"""Sinusoidal position embeddings added to a sequence (not rotary): moshi's `create_sin_embedding`, which
Kyutai adds to its speaker-conditioning source."""

from __future__ import annotations

import torch


def sin_embedding(n: int, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    """moshi's create_sin_embedding for positions 0..n-1: [1, n, dim] float32, cos half first; the
    exponent's denominator is half - 1 (moshi's), so the last frequency is exactly 1 / max_period."""
    half = dim // 2
    pos = torch.arange(n, dtype=torch.float32).view(1, -1, 1)
    adim = torch.arange(half, dtype=torch.float32).view(1, 1, -1)
    phase = pos / (torch.tensor(max_period, dtype=torch.float32) ** (adim / (half - 1)))
    return torch.cat([torch.cos(phase), torch.sin(phase)], dim=-1)
