"""The named variants in the layer library (models/layers) compute what their docstrings say: the two
interleaved rotary tables, moshi's float32 RMSNorm, the fused SwiGLU and moshi's sinusoidal positions,
each against a plain formula or the library's other variant."""

from __future__ import annotations

import math

import torch
from voxcli.models.layers import (
    FusedSwiGLU,
    RMSNorm,
    RMSNormF32,
    SwiGLU,
    apply_rope_moshi,
    interleaved_tables,
    sin_embedding,
)


def _rotate_pairs(x: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Pair (2i, 2i+1) of x's last axis rotated by angle[..., i], in float64."""
    x = x.double()
    a, b = x[..., 0::2], x[..., 1::2]
    c, s = angle.double().cos(), angle.double().sin()
    return torch.stack([a * c - b * s, b * c + a * s], dim=-1).flatten(-2)


def test_interleaved_tables_hold_transformers_frequencies():
    pos = torch.tensor([[0, 3, 17]])
    cos, sin = interleaved_tables(pos, 8)
    assert cos.dtype == torch.float32 and cos.shape == (1, 3, 4)
    want = pos[..., None].double() * 10000.0 ** (-torch.arange(0, 8, 2).double() / 8)
    torch.testing.assert_close(cos.double(), want.cos(), atol=1e-6, rtol=0)
    torch.testing.assert_close(sin.double(), want.sin(), atol=1e-6, rtol=0)


def test_moshi_rope_rotates_each_pair_by_moshis_angle():
    g = torch.Generator().manual_seed(1)
    B, H, T, D = 2, 3, 4, 8
    x = torch.randn(B, H, T, D, generator=g)
    pos = torch.tensor([[0, 1, 2, 3], [5, 9, 10, 40]])
    out = apply_rope_moshi(x, pos, 10000.0)
    freqs = torch.exp(torch.arange(D // 2).double() * (-math.log(10000.0) * 2 / D))
    angle = pos.double()[:, None, :, None] * freqs
    torch.testing.assert_close(out.double(), _rotate_pairs(x, angle), atol=1e-5, rtol=0)
    assert out.dtype == x.dtype
    torch.testing.assert_close(apply_rope_moshi(x.bfloat16(), pos, 10000.0).float(), out, atol=0.05, rtol=0)


def test_rmsnorm_f32_scales_in_float32_and_agrees_in_float32():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 5, 16, generator=g) * 3
    scale = torch.rand(16, generator=g) + 0.5
    moshi, plain = RMSNormF32(16), RMSNorm(16, eps=1e-8)
    with torch.no_grad():
        moshi.alpha.copy_(scale.view(1, 1, 16))
        plain.weight.copy_(scale)
    torch.testing.assert_close(moshi(x), plain(x))
    rms = (x.double() ** 2).mean(-1, keepdim=True).sqrt()
    torch.testing.assert_close(moshi(x).double(), x.double() / rms * scale.double(), atol=1e-5, rtol=0)
    # in bfloat16 the result is the float32 one rounded once
    xb = x.bfloat16()
    torch.testing.assert_close(moshi(xb), moshi(xb.float()).bfloat16(), atol=0, rtol=0)


def test_fused_swiglu_is_swiglu_with_its_projections_stacked():
    torch.manual_seed(3)
    fused, split = FusedSwiGLU(8, 12), SwiGLU(8, 12)
    with torch.no_grad():
        split.gate_proj.weight.copy_(fused.gate_up_proj.weight[:12])
        split.up_proj.weight.copy_(fused.gate_up_proj.weight[12:])
        split.down_proj.weight.copy_(fused.down_proj.weight)
    x = torch.randn(3, 8)
    torch.testing.assert_close(fused(x), split(x))


def test_sin_embedding_is_cos_then_sin_of_moshis_phases():
    e = sin_embedding(5, 8, max_period=100.0)
    assert e.shape == (1, 5, 8) and e.dtype == torch.float32
    phase = torch.arange(5).double()[:, None] / 100.0 ** (torch.arange(4).double() / 3)
    want = torch.cat([phase.cos(), phase.sin()], dim=-1)
    torch.testing.assert_close(e[0].double(), want, atol=1e-6, rtol=0)
    assert torch.equal(e[0, 0], torch.tensor([1.0] * 4 + [0.0] * 4))
