"""What the flows of upstream's CosyVoice models (CausalMaskedDiffWithXvec, CausalMaskedDiffWithDiT) do
alike around their estimators: the speaker condition, the Euler time grid of CausalConditionalCFM and
its classifier-free guidance. The estimator (CosyVoice 2's UNet, CosyVoice 3's DiT) and how a family
batches and caches it are its own."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def speaker_condition(affine: nn.Module, embedding: torch.Tensor, device: torch.device,
                      dtype: torch.dtype) -> torch.Tensor:
    """The flow's speaker vector [out]: the L2-normalised speaker embedding through spk_embed_affine_layer."""
    e = F.normalize(embedding.to(device, dtype).reshape(1, -1), dim=1)
    return affine(e)[0]


def time_span(n_timesteps: int, t_scheduler: str, dtype: torch.dtype,
              device: torch.device | None = None) -> torch.Tensor:
    """The n_timesteps + 1 Euler times from 0 to 1 (cosine-warped for t_scheduler "cosine")."""
    t = torch.linspace(0, 1, n_timesteps + 1, device=device, dtype=dtype)
    if t_scheduler == "cosine":
        t = 1 - torch.cos(t * 0.5 * torch.pi)
    return t


def guided(v_cond: torch.Tensor, v_uncond: torch.Tensor, rate: float) -> torch.Tensor:
    """Classifier-free guidance of the estimator's two rows (with the speaker/prompt and without)."""
    return (1.0 + rate) * v_cond - rate * v_uncond
