"""Zonos' prefix conditioning: the tokens that come before the audio, one per conditioner (the text's
phonemes are many), projected, concatenated and layer-normed. Module and parameter names are the
checkpoint's (`prefix_conditioner.conditioners.<i>.*`), so its state dict loads as-is.

Each conditioner turns one request value into tokens: phoneme ids -> embeddings (espeak), a 128-d speaker
embedding -> a linear projection (speaker), a number or vector -> random Fourier features of its value
scaled to [0, 1] (emotion, fmax, pitch_std, speaking_rate), an integer -> an embedding (language_id). A
conditioner with a learned unconditional vector stands in that vector when the value is absent: the CFG
pair's unconditional sequence takes it for every conditioner but the text, and a request without a speaker
takes the learned unconditional speaker in its conditional sequence too.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .config import Conditioner as ConditionerConfig
from .config import ZonosConfig
from .text import VOCAB


def _projection(kind: str, cond_dim: int, dim: int) -> nn.Module:
    if kind == "linear":
        return nn.Linear(cond_dim, dim)
    if kind == "mlp":
        return nn.Sequential(nn.Linear(cond_dim, dim), nn.SiLU(), nn.Linear(dim, dim))
    return nn.Identity()


class Conditioner(nn.Module):
    def __init__(self, c: ConditionerConfig, dim: int) -> None:
        super().__init__()
        self.cfg = c
        cond_dim = c.cond_dim or dim
        self.project = _projection(c.projection, cond_dim, dim)
        if c.learned_uncond:
            self.uncond_vector = nn.Parameter(torch.zeros(dim))
        if c.type == "EspeakPhonemeConditioner":
            self.phoneme_embedder = nn.Embedding(VOCAB, dim)
        elif c.type == "FourierConditioner":
            if dim % 2:
                raise ValueError("a Fourier conditioner needs an even d_model")
            self.register_buffer("weight", torch.zeros(dim // 2, c.input_dim))
        elif c.type == "IntegerConditioner":
            self.int_embedder = nn.Embedding(int(c.max_val - c.min_val) + 1, dim)

    def tokens(self, value: torch.Tensor | None) -> torch.Tensor:
        """[n, dim] tokens for one request's value (None: the learned unconditional vector)."""
        if value is None:
            return self.uncond_vector.view(1, -1)
        c = self.cfg
        if c.type == "EspeakPhonemeConditioner":
            x = self.phoneme_embedder(value)  # ids [n]
        elif c.type == "FourierConditioner":
            scaled = (value.view(1, 1, -1) - c.min_val) / (c.max_val - c.min_val)
            f = 2 * math.pi * scaled.to(self.weight.dtype) @ self.weight.T
            x = torch.cat([f.cos(), f.sin()], dim=-1).view(1, -1)
        elif c.type == "IntegerConditioner":
            x = self.int_embedder(value.view(1) - int(c.min_val))
        else:  # PassthroughConditioner
            x = value.view(1, -1)
        return self.project(x)


class PrefixConditioner(nn.Module):
    def __init__(self, cfg: ZonosConfig, dim: int) -> None:
        super().__init__()
        self.conditioners = nn.ModuleList(Conditioner(c, dim) for c in cfg.conditioners)
        self.project = _projection(cfg.projection, dim, dim)
        self.norm = nn.LayerNorm(dim)

    def forward(self, values: dict[str, torch.Tensor | None]) -> torch.Tensor:
        """[P, dim] prefix of one sequence; `values[name]` None (or absent) = unconditional."""
        parts = [m.tokens(values.get(m.cfg.name)) for m in self.conditioners]
        return self.norm(self.project(torch.cat(parts, dim=0)))
