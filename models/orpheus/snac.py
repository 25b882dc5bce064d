"""SNAC (hubertsiuzdak/snac_24khz), the decode half, in plain PyTorch: level codes -> the quantizer's
summed projections (each level's code repeated over its stride) -> the depthwise decoder -> PCM.

The parameter names are SNAC's own (`quantizer.quantizers.N.{codebook,out_proj}`,
`decoder.model.N...`), so `pytorch_model.bin` loads as it is; weight norm, stored as
`parametrizations.weight.original0/1`, is folded into plain weights at load. The encoder half and the
quantizer's input projections are not needed to decode and are skipped.

The decoder's noise blocks add `noise * linear(x)`; SNAC draws the noise from the global RNG inside the
forward. Here the caller passes it in (`noise`: one tensor [B, 1, T] per block), so the codec decides how it
is drawn (codec.py: seeded and reproducible).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..base import CheckpointError
from ..locate import read_json
from ..weights import fold_weight_norm
from .spec import KERNEL, RESIDUAL_DILATIONS, context_samples


@dataclass(frozen=True)
class SnacConfig:
    sampling_rate: int = 24000
    encoder_dim: int = 48
    encoder_rates: tuple[int, ...] = (2, 4, 8, 8)
    latent_dim: int | None = None
    decoder_dim: int = 1024
    decoder_rates: tuple[int, ...] = (8, 8, 4, 2)
    attn_window_size: int | None = None
    codebook_size: int = 4096
    codebook_dim: int = 8
    vq_strides: tuple[int, ...] = (4, 2, 1)
    noise: bool = True
    depthwise: bool = True

    @property
    def latent(self) -> int:
        return self.latent_dim or self.encoder_dim * 2 ** len(self.encoder_rates)

    @property
    def hop_length(self) -> int:
        return math.prod(self.encoder_rates)

    @property
    def samples_per_frame(self) -> int:
        """PCM samples of one coarsest-level code: one Orpheus frame (2048 for snac_24khz)."""
        return self.hop_length * self.vq_strides[0]

    def positions_per_frame(self, block: int) -> int:
        """Time steps of decoder block `block`'s output (where its noise is added) per frame."""
        return self.vq_strides[0] * math.prod(self.decoder_rates[: block + 1])

    def context_samples(self) -> int:
        """The decoder's reach either side in output samples (spec.context_samples)."""
        return context_samples(self.hop_length, self.decoder_rates)

    @classmethod
    def read(cls, path: Path) -> SnacConfig:
        if not path.exists():
            raise CheckpointError(
                f"{path} is missing; a SNAC codec folder needs config.json + pytorch_model.bin"
            )
        d = read_json(path)
        known = set(cls.__dataclass_fields__)
        unknown = sorted(set(d) - known)
        if unknown:
            raise CheckpointError(f"{path}: unknown SNAC config field {unknown[0]!r}")
        kw: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
        cfg = cls(**kw)
        if cfg.attn_window_size is not None:
            raise CheckpointError(
                f"{path}: attn_window_size {cfg.attn_window_size} (a SNAC with local "
                "attention) is not supported; Orpheus's snac_24khz has none"
            )
        if tuple(cfg.vq_strides) != (4 * cfg.vq_strides[2], 2 * cfg.vq_strides[2], cfg.vq_strides[2]):
            raise CheckpointError(
                f"{path}: vq_strides {list(cfg.vq_strides)} do not give Orpheus's 1/2/4 codes "
                "per frame (snac_24khz has [4, 2, 1])"
            )
        if math.prod(cfg.decoder_rates) != cfg.hop_length:
            raise CheckpointError(
                f"{path}: decoder_rates {list(cfg.decoder_rates)} do not multiply to the hop "
                f"{cfg.hop_length} of encoder_rates {list(cfg.encoder_rates)}"
            )
        return cfg


class Snake(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(1, channels, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.alpha
        return x + (a + 1e-9).reciprocal() * torch.sin(a * x).pow(2)


class Residual(nn.Module):
    def __init__(self, dim: int, dilation: int, groups: int) -> None:
        super().__init__()
        pad = (KERNEL - 1) * dilation // 2
        self.block = nn.Sequential(
            Snake(dim),
            nn.Conv1d(dim, dim, KERNEL, dilation=dilation, padding=pad, groups=groups),
            Snake(dim),
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
            Snake(cin),
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
        layers += [Snake(out), nn.Conv1d(out, 1, KERNEL, padding=KERNEL // 2), nn.Tanh()]
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


def load_snac(root: Path, device: torch.device, dtype: torch.dtype) -> SnacDecoder:
    """A SNAC folder (config.json + pytorch_model.bin, or model.safetensors) -> the decoder, strictly: every
    decoder / quantizer-output tensor present with its shape (weight-norm pairs folded); the encoder half
    and the input projections are ignored."""
    cfg = SnacConfig.read(root / "config.json")
    with torch.device("meta"):
        net = SnacDecoder(cfg)
    state = _read(root)
    want = net.state_dict()
    out: dict[str, torch.Tensor] = {}
    for k, ref in want.items():
        if k in state:
            t = state[k]
        elif k.endswith(".weight") and k[:-6] + "parametrizations.weight.original0" in state:
            base = k[:-6] + "parametrizations.weight."
            if base + "original1" not in state:
                raise CheckpointError(f"SNAC checkpoint in {root}: tensor {base + 'original1'!r} is missing")
            t = fold_weight_norm(state[base + "original0"].float(), state[base + "original1"].float())
        else:
            raise CheckpointError(
                f"SNAC checkpoint in {root}: tensor {k!r} (shape {list(ref.shape)}) is missing"
            )
        if tuple(t.shape) != tuple(ref.shape):
            raise CheckpointError(
                f"SNAC checkpoint in {root}: tensor {k!r} has shape {list(t.shape)}, its "
                f"config.json needs {list(ref.shape)}"
            )
        if t.is_floating_point() and not torch.isfinite(t).all():
            raise CheckpointError(f"SNAC checkpoint in {root}: tensor {k!r} holds NaN or inf values")
        out[k] = t.to(device=device, dtype=dtype)
    net.load_state_dict(out, strict=True, assign=True)
    return net.eval()


def _read(root: Path) -> dict[str, torch.Tensor]:
    st, pt = root / "model.safetensors", root / "pytorch_model.bin"
    if st.exists():
        from safetensors.torch import load_file

        return load_file(str(st))
    if not pt.exists():
        raise CheckpointError(f"SNAC codec folder {root} has neither pytorch_model.bin nor model.safetensors")
    try:
        sd = torch.load(str(pt), map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises many kinds for a bad pickle
        raise CheckpointError(f"cannot read {pt} (corrupt or not a state dict?): {e}") from None
    if not isinstance(sd, dict):
        raise CheckpointError(f"{pt} does not hold a state dict")
    return sd
