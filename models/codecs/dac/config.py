"""The DAC codec's architecture, read from a `DacModel.save_pretrained` config.json (transformers field
names). Only what the layers need; loss weights and dropout are training-only and ignored."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...base import CheckpointError

_FIELDS = (
    "encoder_hidden_size",
    "downsampling_ratios",
    "decoder_hidden_size",
    "n_codebooks",
    "codebook_size",
    "codebook_dim",
    "sampling_rate",
)


@dataclass(frozen=True)
class DacCodecConfig:
    """Defaults are descript/dac_44khz: 9 codebooks of 1024, hop 512 at 44.1 kHz (86.13 frames/s)."""

    encoder_hidden_size: int = 64
    downsampling_ratios: tuple[int, ...] = (2, 4, 8, 8)
    decoder_hidden_size: int = 1536
    n_codebooks: int = 9
    codebook_size: int = 1024
    codebook_dim: int = 8
    sampling_rate: int = 44100
    # DacConfig derives this as the reverse of downsampling_ratios, but a stored config.json value wins
    # (transformers sets extra config.json keys as attributes after its own __init__), so we keep it.
    upsampling: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        # Odd ratios give a transposed-conv output one sample short per stage (and frames that are not
        # `hop_length` samples); every released DAC uses even ratios, so refuse the rest up front.
        for name, ratios in (("downsampling_ratios", self.downsampling_ratios),
                             ("upsampling_ratios", self.upsampling_ratios)):
            if not ratios or any(r < 2 or r % 2 for r in ratios):
                raise CheckpointError(f"DAC {name} must be even numbers >= 2, got {list(ratios)}")
        if math.prod(self.upsampling_ratios) != self.hop_length:
            raise CheckpointError(
                f"DAC upsampling_ratios {list(self.upsampling_ratios)} must multiply to the encoder hop "
                f"{self.hop_length} (the product of downsampling_ratios) so one code frame is one hop"
            )
        if self.codebook_size < 2 or self.codebook_size & (self.codebook_size - 1):
            raise CheckpointError(f"DAC codebook_size must be a power of 2, got {self.codebook_size}")
        if self.decoder_hidden_size % 2 ** len(self.upsampling_ratios):
            raise CheckpointError(
                f"DAC decoder_hidden_size {self.decoder_hidden_size} must divide by "
                f"2**{len(self.upsampling_ratios)} (it halves at every upsampling block)"
            )

    @property
    def upsampling_ratios(self) -> tuple[int, ...]:
        return self.upsampling if self.upsampling is not None else tuple(reversed(self.downsampling_ratios))

    @property
    def hidden_size(self) -> int:
        """Latent width between encoder, quantizer and decoder."""
        return self.encoder_hidden_size * 2 ** len(self.downsampling_ratios)

    @property
    def hop_length(self) -> int:
        return math.prod(self.downsampling_ratios)

    @property
    def frame_rate(self) -> float:
        return self.sampling_rate / self.hop_length

    def to_dict(self) -> dict[str, Any]:
        """config.json as `DacConfig(...).save_pretrained` writes it (derived fields included)."""
        return {
            "architectures": ["DacModel"],
            "model_type": "dac",
            "encoder_hidden_size": self.encoder_hidden_size,
            "downsampling_ratios": list(self.downsampling_ratios),
            "upsampling_ratios": list(self.upsampling_ratios),
            "decoder_hidden_size": self.decoder_hidden_size,
            "n_codebooks": self.n_codebooks,
            "codebook_size": self.codebook_size,
            "codebook_dim": self.codebook_dim,
            "hidden_size": self.hidden_size,
            "hop_length": self.hop_length,
            "sampling_rate": self.sampling_rate,
            "quantizer_dropout": 0.0,
            "commitment_loss_weight": 0.25,
            "codebook_loss_weight": 1.0,
            "dtype": "float32",
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: Path | str = "config.json") -> DacCodecConfig:
        if d.get("model_type") not in (None, "dac"):
            raise CheckpointError(f"{where}: model_type is {d.get('model_type')!r}, a DAC codec needs 'dac'")
        kw: dict[str, Any] = {}
        for name in _FIELDS:
            if name in d:
                v = d[name]
                try:
                    kw[name] = tuple(int(x) for x in v) if name == "downsampling_ratios" else int(v)
                except (TypeError, ValueError):
                    raise CheckpointError(f"{where}: field {name!r} has an invalid value {v!r}") from None
        if d.get("upsampling_ratios") is not None:
            kw["upsampling"] = tuple(int(x) for x in d["upsampling_ratios"])
        try:
            return cls(**kw)
        except CheckpointError as e:
            raise CheckpointError(f"{where}: {e}") from None

    @classmethod
    def read(cls, path: Path) -> DacCodecConfig:
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise CheckpointError(f"{path} is missing; a DAC codec folder needs config.json") from None
        except json.JSONDecodeError as e:
            raise CheckpointError(f"{path} is not valid JSON ({e})") from None
        return cls.from_dict(d, path)


def decoder_lookahead_samples(upsampling_ratios: tuple[int, ...] | list[int]) -> int:
    """Output samples a streamed DAC sample waits for (the decoder's right context; layers.py's
    `lookahead_samples` computes it from the built layers): conv1's padding 3; per upsampling block of
    stride s, the context so far times s, plus the transposed conv's ceil(s / 2) and the three dilated
    residual units' 3 x (1 + 3 + 9) = 39; conv2's 3. Architecture only, so no torch and no weights."""
    delay = 3
    for s in upsampling_ratios:
        delay = delay * s + math.ceil(s / 2) + 39
    return delay + 3


def decoder_lookahead_frames(upsampling_ratios: tuple[int, ...] | list[int]) -> float:
    """The same right context in code frames (one frame = the ratios' product in samples):
    ModelSpec.codec_lookahead_frames for a DAC-shaped decoder."""
    return decoder_lookahead_samples(upsampling_ratios) / math.prod(upsampling_ratios)
