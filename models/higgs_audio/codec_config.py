"""The Higgs audio tokenizer's config.json, read without torch (`vox voices` describes a Higgs checkpoint
from its config files alone; codec.py builds the decoder from it)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..base import CheckpointError
from ..locate import read_json

TOKENIZER_HUB_ID = "bosonai/higgs-audio-v2-tokenizer"


@dataclass(frozen=True)
class HiggsCodecConfig:
    """What decoding needs from the tokenizer's config.json (transformers field names)."""

    sampling_rate: int = 24000
    upsampling_ratios: tuple[int, ...] = (8, 5, 4, 2, 3)
    decoder_hidden_size: int = 1024
    acoustic_hidden: int = 256  # acoustic_model_config.hidden_size (the DAC latent width)
    hidden_size: int = 1024  # acoustic + semantic hidden: the quantizer's width
    codebook_dim: int = 64
    codebook_size: int = 1024
    n_codebooks: int = 8  # num_quantizers, from target_bandwidths

    @property
    def hop_length(self) -> int:
        return math.prod(self.upsampling_ratios)

    @property
    def frame_rate(self) -> float:
        return self.sampling_rate / self.hop_length

    @classmethod
    def read(cls, path: Path) -> HiggsCodecConfig:
        d = read_json(path)
        if d.get("model_type") not in (None, "higgs_audio_v2_tokenizer"):
            raise CheckpointError(
                f"{path}: model_type is {d.get('model_type')!r}, the Higgs audio tokenizer "
                "needs 'higgs_audio_v2_tokenizer'"
            )
        ac = d.get("acoustic_model_config") or {}
        sem = d.get("semantic_model_config") or {}
        try:
            down = [int(x) for x in ac.get("downsampling_ratios", [8, 5, 4, 2, 3])]
            up = tuple(int(x) for x in ac.get("upsampling_ratios", down[::-1]))
            sr = int(d.get("sample_rate", 24000))
            acoustic = int(ac.get("hidden_size", 256))
            hidden = acoustic + int(sem.get("hidden_size", 768))
            bands = [float(b) for b in d.get("target_bandwidths", [0.5, 1, 1.5, 2])]
            size = int(d.get("codebook_size", 1024))
            frame_rate = math.ceil(sr / math.prod(down))
            nq = int(1000 * bands[-1] // (frame_rate * math.ceil(math.log2(size))))
            cfg = cls(
                sampling_rate=sr,
                upsampling_ratios=up,
                decoder_hidden_size=int(ac.get("decoder_hidden_size", 1024)),
                acoustic_hidden=acoustic,
                hidden_size=hidden,
                codebook_dim=int(d.get("codebook_dim", 64)),
                codebook_size=size,
                n_codebooks=nq,
            )
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{path}: invalid audio tokenizer setting ({e})") from None
        if math.prod(down) != cfg.hop_length:
            raise CheckpointError(
                f"{path}: upsampling_ratios {list(up)} must multiply to the encoder hop {math.prod(down)}"
            )
        if cfg.decoder_hidden_size % 2 ** len(up):
            raise CheckpointError(
                f"{path}: decoder_hidden_size {cfg.decoder_hidden_size} must divide by "
                f"2**{len(up)} (it halves at every upsampling block)"
            )
        return cfg
