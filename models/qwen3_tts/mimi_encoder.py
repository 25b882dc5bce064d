"""Qwen3-TTS's Mimi encoder (24 kHz waveform -> 12.5 Hz codes [T, 16]) for voice-clone ICL reference codes:
the shared Mimi encode path (models/codecs/mimi/encoder.py) as the official
`Qwen3TTSTokenizerV2Model.encode` runs it: the first 16 quantizers, and full causal attention (the
transformers 4.57 encoder it wraps builds a plain causal mask, its `sliding_window` is not applied). Its
weights are the `encoder.*` keys of speech_tokenizer/model.safetensors.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from ..codecs.mimi.config import MimiConfig
from ..codecs.mimi.encoder import (  # noqa: F401 - re-exported (tiny_audio.py, the tests)
    SAMPLE_RATE,
    EuclideanCodebook,
    MimiEncoder,
    _Scale,
    check_reference_audio,
)
from .codec import read_tokenizer_config, speech_tokenizer_dir
from .weights_check import load_checked

MimiEncoderConfig = MimiConfig  # speech_tokenizer/config.json `encoder_config` is a transformers MimiConfig


class MimiEncoderModel(MimiEncoder):
    """The official `encoder.*` submodules: encoder, encoder_transformer, downsample, quantizer."""

    def __init__(self, cfg: MimiConfig, valid_quantizers: int = 16, downsample_rate: int = 1920) -> None:
        super().__init__(cfg, window=None)
        self.valid_quantizers = valid_quantizers
        self.qwen_downsample_rate = downsample_rate

    @property
    def downsample_rate(self) -> int:
        return self.qwen_downsample_rate

    @classmethod
    def from_checkpoint(
        cls, path: str | Path, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32
    ) -> MimiEncoderModel:
        st_dir = speech_tokenizer_dir(path)
        full = read_tokenizer_config(st_dir)
        cfg = MimiConfig.from_dict(
            full.get("encoder_config") or {}, f"{st_dir / 'config.json'} encoder_config"
        )
        with torch.device("meta"):
            model = cls(
                cfg, full.get("encoder_valid_num_quantizers", 16), full.get("encode_downsample_rate", 1920)
            )
        load_checked(model, st_dir / "model.safetensors", prefix="encoder.", device=device, dtype=dtype)
        return model.eval()

    def encode_with_gaps(  # type: ignore[override]
        self, wav: np.ndarray, sample_rate: int = SAMPLE_RATE, n_quantizers: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        return super().encode_with_gaps(wav, sample_rate, n_quantizers or self.valid_quantizers)

    def encode(self, wav: np.ndarray, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
        """Reference waveform (mono float32 at 24 kHz) -> codes [ceil(n / 1920), 16] int64."""
        return self.encode_with_gaps(wav, sample_rate)[0]


@lru_cache(maxsize=4)
def _cached_encoder(path: str, device: str, dtype: torch.dtype) -> MimiEncoderModel:
    return MimiEncoderModel.from_checkpoint(path, device=device, dtype=dtype)


def encode(
    checkpoint: str | Path,
    wav: np.ndarray,
    sample_rate: int = SAMPLE_RATE,
    device: str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> np.ndarray:
    """Reference codes [T, 16] for `wav` with the speech tokenizer of `checkpoint` (loaded once)."""
    return _cached_encoder(str(Path(checkpoint).resolve()), str(device), dtype).encode(wav, sample_rate)
