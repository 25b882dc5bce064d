"""RMSNorm as the reference implementations compute it: transformers' (`RMSNorm`: the scale applied after
the cast back) and moshi's (`RMSNormF32`: the scale applied in float32, then the cast). In bfloat16 the two
round differently, so each family keeps its reference's."""

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


class RMSNormF32(nn.Module):
    """moshi's `rms_norm_f32`: normalised and scaled in float32, cast back last; eps 1e-8 inside the mean's
    sum; the parameter is moshi's `alpha` [1, 1, dim]."""

    def __init__(self, dim: int, eps: float = 1e-8) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, 1, dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        var = self.eps + torch.mean(xf**2, dim=-1, keepdim=True)
        return (xf * (self.alpha.float() * torch.rsqrt(var))).to(x.dtype)
