"""VibeVoice's diffusion head and its two connectors (module names as in the checkpoint).

The head predicts the v-target of a noisy 64-d latent from the LM's last hidden state (the condition)
and the timestep: a sinusoidal timestep embedding through an MLP is added to the projected condition,
then adaLN-modulated SwiGLU blocks (shift / scale / gate from the condition) and a modulated final layer.
The connectors (`multi_modal_projector` for the acoustic latent, `semantic_connector` for the semantic
encoder's output) map a latent to the LM width: linear, RMS norm, linear.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..layers import RMSNorm, SwiGLU
from .config import HeadConfig


class TimestepMLP(nn.Module):
    def __init__(self, c: HeadConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(c.frequency_embedding_size, c.hidden_size, bias=False)
        self.fc2 = nn.Linear(c.hidden_size, c.hidden_size, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.silu(self.fc1(x)))


class AdaLayer(nn.Module):
    def __init__(self, c: HeadConfig) -> None:
        super().__init__()
        self.ffn = SwiGLU(c.hidden_size, c.intermediate_size)
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.linear = nn.Linear(c.hidden_size, 3 * c.hidden_size, bias=False)

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        shift, scale, gate = self.linear(F.silu(cond)).chunk(3, dim=-1)
        return x + gate * self.ffn(self.norm(x) * (1 + scale) + shift)


class FinalLayer(nn.Module):
    def __init__(self, c: HeadConfig) -> None:
        super().__init__()
        self.eps = c.rms_norm_eps
        self.linear_1 = nn.Linear(c.hidden_size, 2 * c.hidden_size, bias=False)
        self.linear_2 = nn.Linear(c.hidden_size, c.latent_size, bias=False)

    def forward(self, x: torch.Tensor, cond: torch.Tensor) -> torch.Tensor:
        shift, scale = self.linear_1(F.silu(cond)).chunk(2, dim=-1)
        return self.linear_2(F.rms_norm(x, (x.shape[-1],), eps=self.eps) * (1 + scale) + shift)


class DiffusionHead(nn.Module):
    def __init__(self, c: HeadConfig) -> None:
        super().__init__()
        self.noisy_images_proj = nn.Linear(c.latent_size, c.hidden_size, bias=False)
        self.cond_proj = nn.Linear(c.hidden_size, c.hidden_size, bias=False)
        self.timestep_proj = TimestepMLP(c)
        self.layers = nn.ModuleList(AdaLayer(c) for _ in range(c.num_layers))
        self.final_layer = FinalLayer(c)
        half = c.frequency_embedding_size // 2
        # built on the CPU explicitly: the module is constructed under torch.device("meta")
        self._freq = torch.exp(-math.log(c.max_period) * torch.arange(half, dtype=torch.float32,
                                                                       device="cpu") / half)

    def project_condition(self, condition: torch.Tensor) -> torch.Tensor:
        """The condition's projection, which every solver step of a frame shares."""
        return self.cond_proj(condition)

    def forward(self, x: torch.Tensor, timestep: int, cond: torch.Tensor) -> torch.Tensor:
        """x [N, latent] noisy latents, cond [N, H] projected conditions -> v-prediction [N, latent]."""
        t = torch.full((x.shape[0],), float(timestep), dtype=x.dtype, device=x.device)
        freq = t[:, None].float() * self._freq[None].to(x.device)
        emb = torch.cat([torch.cos(freq), torch.sin(freq)], dim=-1).to(x.dtype)
        c = cond + self.timestep_proj(emb)
        h = self.noisy_images_proj(x)
        for layer in self.layers:
            h = layer(h, c)
        return self.final_layer(h, c)


class Connector(nn.Module):
    def __init__(self, dim_in: int, dim_out: int) -> None:
        super().__init__()
        self.linear_1 = nn.Linear(dim_in, dim_out)
        self.act = RMSNorm(dim_out, 1e-6)
        self.linear_2 = nn.Linear(dim_out, dim_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_2(self.act(self.linear_1(x)))
