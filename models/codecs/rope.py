"""Rotary position embedding as the streaming codec transformers apply it (Qwen3-TTS's 12 Hz decoder,
Mimi's encoder and decoder): half-split layout, cos/sin computed in float32 at absolute positions so a
streamed chunk rotates exactly as the full forward does."""

from __future__ import annotations

import torch


def rope_cos_sin(
    positions: torch.Tensor, head_dim: int, theta: float, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin [B, L, head_dim] for absolute positions [B, L] (half-split layout, fp32 math)."""
    inv_freq = 1.0 / (
        theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64, device=positions.device).float() / head_dim)
    )
    freqs = positions.float()[..., None] * inv_freq
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos[:, None] + rotated * sin[:, None]
