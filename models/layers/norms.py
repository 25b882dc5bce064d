"""RMSNorm as the reference implementations compute it."""

from __future__ import annotations

import torch
from torch import nn


class RMSNorm(nn.Module):
    """RMS norm computed in fp32 and cast back, as the reference implementations do (matters for bf16).
    The parameter is `weight`, the name every checkpoint uses."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(x.dtype)
