"""The audio IO's codec: which one a checkpoint names, its rates, and the decoder voxcli runs for it.

`multimodal_io.discrete_audio.codec_choice` is "Xcodec" (Bagpiper: transformers `XcodecModel`, e.g.
hf-audio/xcodec-hubert-general, 16 kHz, 320 samples per frame) or "ESPnet" (OpusLM's DAC: an
espnet_model_zoo pack that ESPnet's `AudioCoding.from_pretrained` loads; decoded by our port,
espnet_dac.py / espnet_dac_stream.py). SSL streams carry no waveform and are dropped before the codec
(program._codes), as the reference's decode_batch does.
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


NEEDS = {"Xcodec": "config.json", "ESPnet": "meta.yaml"}  # what a codec folder of each kind holds


def codec_folder(cfg: SpeechLMConfig):
    tag = cfg.codec.get("codec_hf_model_tag")
    choice = cfg.codec.get("codec_choice")
    if choice not in NEEDS or not tag:
        return None
    return find_folder(str(tag), f"{cfg.train_yaml} multimodal_io.discrete_audio.codec_hf_model_tag",
                       need=NEEDS[choice], root=cfg.root)


def codec_rates(cfg: SpeechLMConfig) -> tuple[int, int]:
    folder = codec_folder(cfg)
    if folder is None:
        return DEFAULT_RATES
    if cfg.codec.get("codec_choice") == "ESPnet":
        import yaml

        from .espnet_dac import DacShape, pack_files

        conf = pack_files(folder)[0]
        shape = DacShape.from_config(yaml.safe_load(conf.read_text()) or {}, str(conf))
        return shape.sample_rate, shape.hop
    c = read_json(folder / "config.json")
    ratios = (c.get("acoustic_model_config") or {}).get("downsampling_ratios", [8, 5, 4, 2])
    return int(c.get("sample_rate", 16000)), int(np.prod(ratios))


def load_codec(cfg: SpeechLMConfig, device: torch.device) -> Any:
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

        return EspnetDacDecoder.load(folder, device, n_streams=cfg.layout.codec_streams)
    from .xcodec import XcodecDecoder

    return XcodecDecoder.load(folder, device, n_streams=cfg.layout.codec_streams)
