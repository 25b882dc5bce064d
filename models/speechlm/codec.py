"""The audio IO's codec: which one a checkpoint names, its rates, and the decoder voxcli runs for it.

`multimodal_io.discrete_audio.codec_choice` is "Xcodec" (Bagpiper: transformers `XcodecModel`, e.g.
hf-audio/xcodec-hubert-general, 16 kHz, 320 samples per frame) or "ESPnet" (OpusLM's DAC: an
espnet_model_zoo pack that ESPnet's `AudioCoding.from_pretrained` loads; decoded by our port,
espnet_dac.py / espnet_dac_stream.py). SSL streams carry no waveform and are dropped before the codec
(program._codes), as the reference's decode_batch does.
"""

from __future__ import annotations

from typing import Any

import torch

from ..base import CheckpointError
from ..dtypes import torch_dtype
from .codec_files import DEFAULT_RATES, NEEDS, codec_folder, codec_rates  # noqa: F401 - torch-free
from .config import SpeechLMConfig


def load_codec(cfg: SpeechLMConfig, device: torch.device, dtype: str = "float32") -> Any:
    """The checkpoint's codec decoder in `dtype` (the codec part of spec.DTYPE_POLICY)."""
    choice = cfg.codec.get("codec_choice")
    if choice not in NEEDS:
        raise CheckpointError(f"{cfg.train_yaml}: multimodal_io.discrete_audio.codec_choice {choice!r} has "
                              "no decoder in voxcli (Xcodec or ESPnet)")
    folder = codec_folder(cfg)
    if folder is None:
        raise CheckpointError(f"{cfg.train_yaml}: multimodal_io.discrete_audio.codec_hf_model_tag is "
                              f"missing; it names the {choice} codec checkpoint that decodes the audio")
    if choice == "ESPnet":
        from .espnet_dac_stream import EspnetDacDecoder

        return EspnetDacDecoder.load(folder, device, n_streams=cfg.layout.codec_streams,
                                     dtype=torch_dtype(dtype))
    from .xcodec import XcodecDecoder

    return XcodecDecoder.load(folder, device, n_streams=cfg.layout.codec_streams, dtype=dtype)
