"""Where a SpeechLM checkpoint's codec is and its rates, from config files alone (no torch): `vox voices`
describes the model without loading it; codec.py loads the codec from the same folder."""

from __future__ import annotations

import math

from ..locate import read_json
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

        from .espnet_dac_config import DacShape, pack_files

        conf = pack_files(folder)[0]
        shape = DacShape.from_config(yaml.safe_load(conf.read_text()) or {}, str(conf))
        return shape.sample_rate, shape.hop
    c = read_json(folder / "config.json")
    ratios = (c.get("acoustic_model_config") or {}).get("downsampling_ratios", [8, 5, 4, 2])
    return int(c.get("sample_rate", 16000)), int(math.prod(ratios))
