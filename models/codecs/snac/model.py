"""SNAC (hubertsiuzdak/snac_24khz), the decode half, in plain PyTorch: level codes -> the quantizer's
summed projections (each level's code repeated over its stride) -> the depthwise decoder -> PCM.

The parameter names are SNAC's own (`quantizer.quantizers.N.{codebook,out_proj}`,
`decoder.model.N...`), so `pytorch_model.bin` loads as it is (weights.py). The encoder half and the
quantizer's input projections are not needed to decode and are not built.

The decoder's noise blocks add `noise * linear(x)`; SNAC draws the noise from the global RNG inside the
forward. Here the caller passes it in (`noise`: one tensor [B, 1, T] per block), so the codec decides how it
is drawn (noise.py: seeded and reproducible).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..dac.layers import Snake1d  # SNAC's snake is DAC's, op for op
from .config import KERNEL, RESIDUAL_DILATIONS, SnacConfig


class Residual(nn.Module):
    def __init__(self, dim: int, dilation: int, groups: int) -> None:
        super().__init__()
        pad = (KERNEL - 1) * dilation // 2
        self.block = nn.Sequential(
            Snake1d(dim),
            nn.Conv1d(dim, dim, KERNEL, dilation=dilation, padding=pad, groups=groups),
            Snake1d(dim),
            nn.Conv1d(dim, dim, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)  # same length: SNAC's crop never fires for these paddings


class Noise(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.linear = nn.Conv1d(dim, dim, 1, bias=False)


class Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, noise: bool, groups: int) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            Snake1d(cin),
            nn.ConvTranspose1d(
                cin, cout, 2 * stride, stride=stride, padding=math.ceil(stride / 2), output_padding=stride % 2
            ),
        ]
        if noise:
            layers.append(Noise(cout))
        layers += [Residual(cout, d, groups) for d in RESIDUAL_DILATIONS]
        self.block = nn.Sequential(*layers)
        self.has_noise = noise

    def forward(self, x: torch.Tensor, noise: torch.Tensor | None) -> torch.Tensor:
        layers = list(self.block)
        x = layers[1](layers[0](x))
        rest = layers[2:]
        if self.has_noise:
            if noise is None or noise.shape != (x.shape[0], 1, x.shape[2]):
                got = None if noise is None else tuple(noise.shape)
                raise ValueError(
                    f"a noise block needs noise of shape {(x.shape[0], 1, x.shape[2])}, got {got}"
                )
            x = x + noise.to(x.dtype) * rest[0].linear(x)
            rest = rest[1:]
        for layer in rest:
            x = layer(x)
        return x


class Decoder(nn.Module):
    def __init__(self, cfg: SnacConfig) -> None:
        super().__init__()
        latent, ch = cfg.latent, cfg.decoder_dim
        layers: list[nn.Module] = (
            [nn.Conv1d(latent, latent, KERNEL, padding=KERNEL // 2, groups=latent), nn.Conv1d(latent, ch, 1)]
            if cfg.depthwise
            else [nn.Conv1d(latent, ch, KERNEL, padding=KERNEL // 2)]
        )
        out = ch
        for i, stride in enumerate(cfg.decoder_rates):
            cin, out = ch // 2**i, ch // 2 ** (i + 1)
            layers.append(Block(cin, out, stride, cfg.noise, groups=out if cfg.depthwise else 1))
        layers += [Snake1d(out), nn.Conv1d(out, 1, KERNEL, padding=KERNEL // 2), nn.Tanh()]
        self.model = nn.Sequential(*layers)

    def forward(self, z: torch.Tensor, noise: list[torch.Tensor] | None) -> torch.Tensor:
        """z [B, latent, T] -> PCM [B, 1, T * hop]; `noise[i]` for block i (None: a SNAC without noise)."""
        i = 0
        for layer in self.model:
            if isinstance(layer, Block):
                z = layer(z, noise[i] if noise is not None else None)
                i += 1
            else:
                z = layer(z)
        return z


class Level(nn.Module):
    def __init__(self, cfg: SnacConfig, stride: int) -> None:
        super().__init__()
        self.codebook = nn.Embedding(cfg.codebook_size, cfg.codebook_dim)
        self.out_proj = nn.Conv1d(cfg.codebook_dim, cfg.latent, 1)
        self.stride = stride


class Quantizer(nn.Module):
    def __init__(self, cfg: SnacConfig) -> None:
        super().__init__()
        self.quantizers = nn.ModuleList(Level(cfg, s) for s in cfg.vq_strides)

    def from_codes(self, codes: list[torch.Tensor]) -> torch.Tensor:
        """Per level [B, T_level] codes -> the latent [B, latent, T] (the levels' projections, summed)."""
        z: torch.Tensor | None = None
        for level, c in zip(self.quantizers, codes, strict=True):
            e = F.embedding(c, level.codebook.weight).transpose(1, 2)
            zi = level.out_proj(e).repeat_interleave(level.stride, dim=-1)
            z = zi if z is None else z + zi
        assert z is not None
        return z


class SnacDecoder(nn.Module):
    def __init__(self, cfg: SnacConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.quantizer = Quantizer(cfg)
        self.decoder = Decoder(cfg)

    def noise_blocks(self) -> int:
        return len(self.cfg.decoder_rates) if self.cfg.noise else 0

    def forward(self, codes: list[torch.Tensor], noise: list[torch.Tensor] | None) -> torch.Tensor:
        return self.decoder(self.quantizer.from_codes(codes), noise)
