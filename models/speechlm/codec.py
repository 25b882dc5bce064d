"""The audio IO's codec: which one a checkpoint names, its rates, and the decoder voxcli runs for it.

`multimodal_io.discrete_audio.codec_choice` is "Xcodec" (Bagpiper: transformers `XcodecModel`, e.g.
hf-audio/xcodec-hubert-general, 16 kHz, 320 samples per frame) or "ESPnet" (OpusLM's DAC, loaded by
ESPnet's own GAN-codec code, which no PyPI class outside ESPnet decodes). SSL streams carry no waveform
and are dropped before the codec (program._codes), as the reference's decode_batch does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..base import CheckpointError
from ..checkpoint import read_json
from .config import SpeechLMConfig, find_folder

# OpusLM's ESPnet DAC and XEUS both run at 16 kHz with a 320-sample (20 ms) frame shift: the reference
# checks they match (DiscreteAudioIO._init_sanity_check), and X-Codec uses the same rates.
DEFAULT_RATES = (16000, 320)


def codec_folder(cfg: SpeechLMConfig):
    tag = cfg.codec.get("codec_hf_model_tag")
    if cfg.codec.get("codec_choice") != "Xcodec" or not tag:
        return None
    return find_folder(str(tag), f"{cfg.train_yaml} multimodal_io.discrete_audio.codec_hf_model_tag",
                       root=cfg.root)


def codec_rates(cfg: SpeechLMConfig) -> tuple[int, int]:
    folder = codec_folder(cfg) if cfg.codec.get("codec_choice") == "Xcodec" else None
    if folder is None:
        return DEFAULT_RATES
    c = read_json(folder / "config.json")
    ratios = (c.get("acoustic_model_config") or {}).get("downsampling_ratios", [8, 5, 4, 2])
    return int(c.get("sample_rate", 16000)), int(np.prod(ratios))


def load_codec(cfg: SpeechLMConfig, device: torch.device) -> Any:
    choice = cfg.codec.get("codec_choice")
    if choice == "Xcodec":
        from .xcodec import XcodecDecoder

        folder = codec_folder(cfg)
        if folder is None:
            raise CheckpointError(f"{cfg.train_yaml}: multimodal_io.discrete_audio.codec_hf_model_tag is "
                                  "missing; it names the X-Codec checkpoint that decodes the audio")
        return XcodecDecoder.load(folder, device, n_streams=cfg.layout.codec_streams)
    raise CheckpointError(f"{cfg.train_yaml}: codec_choice {choice!r} has no decoder in voxcli yet (X-Codec "
                          "only; OpusLM's ESPnet DAC needs ESPnet's own codec code)")
