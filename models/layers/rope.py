"""Rotary position embedding: the cos/sin tables (plain or Llama-3-scaled frequencies, computed in fp32 as
the references do) and the two ways of rotating a head vector by them:

* half-split (`apply_rope`): dimension i pairs with i + head_dim/2 (transformers' rotate_half), tables
  [..., T, head_dim] in the activation dtype;
* interleaved (`apply_rope_interleaved`): dimension 2i pairs with 2i + 1 (Zonos, Kyutai's moshi), rotated
  in float32 whatever the activation dtype, tables [..., head_dim/2] in float32: transformers' frequencies
  (`interleaved_tables`, Zonos) or moshi's exp-of-log ones (`apply_rope_moshi`, Kyutai), which differ in the
  last bits, so each family keeps the table its reference computes.
"""

from __future__ import annotations

import math

import torch

from .config import Rope


def inv_frequencies(head_dim: int, rope: Rope) -> torch.Tensor:
    """transformers' default / llama3 inverse frequencies (fp32, on the CPU)."""
    # Built on the CPU explicitly: modules are often constructed under `torch.device("meta")`.
    steps = torch.arange(0, head_dim, 2, dtype=torch.int64, device="cpu").float()
    inv = 1.0 / (rope.theta ** (steps / head_dim))
    if rope.rope_type != "llama3":
        return inv
    old = rope.original_max_position_embeddings
    low_wl, high_wl = old / rope.low_freq_factor, old / rope.high_freq_factor
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wl, inv / rope.factor, inv)
    smooth = (old / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor)
    smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled
    medium = ~(wavelen < high_wl) * ~(wavelen > low_wl)
    return torch.where(medium, smoothed, scaled)


class Rotary:
    """Half-split cos/sin tables for integer positions (fp32 inv_freq, outer product, cast last)."""

    def __init__(self, head_dim: int, rope: Rope) -> None:
        self.inv_freq = inv_frequencies(head_dim, rope)

    def __call__(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions.float()[..., None] * self.inv_freq.to(positions.device)  # [..., head_dim/2]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Half-split RoPE: x [..., T, heads, hd]; cos/sin [..., T, hd] (one table for every head)."""
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    return x * cos + rotate_half(x) * sin


def apply_rope_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Interleaved RoPE: x [..., hd]; cos/sin float32, broadcastable to [..., hd/2] (the caller puts the
    head axis where its layout has it). Rotated in float32, returned in x's dtype."""
    a, b = x.float().unflatten(-1, (-1, 2)).unbind(-1)
    return torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2).to(x.dtype)


def interleaved_tables(
    positions: torch.Tensor, head_dim: int, rope: Rope = Rope()
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin [..., head_dim/2] in float32 for integer positions: transformers' frequencies, the tables
    `apply_rope_interleaved` takes."""
    angle = positions.float()[..., None] * inv_frequencies(head_dim, rope).to(positions.device)
    return angle.cos(), angle.sin()


def apply_rope_moshi(x: torch.Tensor, positions: torch.Tensor, max_period: float) -> torch.Tensor:
    """moshi's apply_rope (interleave=True) on x [B, H, T, D] at positions [B, T], in float32: its frequency
    table exp(-2i ln(max_period) / D), not transformers' max_period^(-2i / D)."""
    d = x.shape[-1]
    ds = torch.arange(d // 2, device=x.device, dtype=torch.float32)
    freqs = torch.exp(ds * (-math.log(max_period) * 2 / d))
    ang = freqs * positions.float()[:, None, :, None]
    return apply_rope_interleaved(x, torch.cos(ang), torch.sin(ang))
