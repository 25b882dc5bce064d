"""SNAC's config.json (`SnacConfig`, read strictly) and the decoder's geometry that follows from it: frame
length, noise positions, and how far a sample depends on its input. No torch: a spec reads it without
loading the codec."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...base import CheckpointError
from ...locate import read_json

KERNEL = 7
RESIDUAL_DILATIONS = (1, 3, 9)


def context_samples(hop: int, decoder_rates: list[int] | tuple[int, ...]) -> int:
    """How far (in output samples) a sample of SNAC's decoder may depend on its input, either side: each
    convolution's half kernel (dilated) at its own rate, each transposed convolution's two input steps.
    A bound (5,636 samples = 2.75 frames for snac_24khz): an exact streaming decode holds back this much,
    rounded up to frames, and re-decodes as much left context (Orpheus' "whole" mode)."""
    rate = hop  # output samples per step at the current layer
    r = (KERNEL // 2) * rate  # the input convolution
    for s in decoder_rates:
        out = rate // s
        r += 2 * rate + sum((KERNEL // 2) * d for d in RESIDUAL_DILATIONS) * out
        rate = out
    return r + KERNEL // 2  # the output convolution



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
        """PCM samples of one coarsest-level code (2048 for snac_24khz; an Orpheus frame)."""
        return self.hop_length * self.vq_strides[0]

    def positions_per_frame(self, block: int) -> int:
        """Time steps of decoder block `block`'s output (where its noise is added) per frame."""
        return self.vq_strides[0] * math.prod(self.decoder_rates[: block + 1])

    def context_samples(self) -> int:
        """The decoder's reach either side in output samples (`context_samples`)."""
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
                "attention) is not supported; snac_24khz has none"
            )
        if tuple(cfg.vq_strides) != (4 * cfg.vq_strides[2], 2 * cfg.vq_strides[2], cfg.vq_strides[2]):
            raise CheckpointError(
                f"{path}: vq_strides {list(cfg.vq_strides)} do not give 1/2/4 codes per "
                "coarsest step, as this decoder and Orpheus' frames need (snac_24khz has [4, 2, 1])"
            )
        if math.prod(cfg.decoder_rates) != cfg.hop_length:
            raise CheckpointError(
                f"{path}: decoder_rates {list(cfg.decoder_rates)} do not multiply to the hop "
                f"{cfg.hop_length} of encoder_rates {list(cfg.encoder_rates)}"
            )
        return cfg
