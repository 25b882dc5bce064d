"""What a Dia checkpoint offers (modes, languages, audio rates), from its config files alone. No torch:
`vox voices` builds this without loading weights; the program uses it too, so both agree."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..base import ChunkSchedule, ModelSpec
from ..codecs.dac.config import decoder_lookahead_frames
from ..dtypes import FOLLOWS, DtypePolicy, Part
from ..locate import read_json
from .config import DiaConfig, parse_config

SAMPLE_RATE = 44100
HOP = 512
# 86 frames/s: the DAC decoder holds back ~9.3 frames of look-ahead (dac.py), so a 12-frame first chunk
# plays 2.7 frames (31 ms); later chunks start small and grow with the buffered audio so each is made before
# the audio before it runs out at a ~7 ms step (recipes/dia-1.6b.toml derives it), then 48 frames (0.56 s).
DEFAULT_CHUNKS = ChunkSchedule(first=12, ramp=(4, 6, 10, 16, 24, 40), steady=48)

# The decoder and its DAC codec follow --dtype.
DTYPE_POLICY = DtypePolicy(parts={
    "lm": Part(FOLLOWS, ("weights",)),
    "codec": Part(FOLLOWS, ("codec_model.net",)),
})


def codec_lookahead_frames(root: Path) -> float:
    """Frames of audio the DAC decoder holds back (ModelSpec.codec_lookahead_frames), from the ratios in
    codec/config.json when the checkpoint carries its codec, the published dac_44khz's (8, 8, 4, 2:
    4757 samples = 9.29 frames) otherwise."""
    ratios: list[int] = [8, 8, 4, 2]
    cfg = root / "codec" / "config.json"
    if cfg.exists():
        d = json.loads(cfg.read_text())
        ratios = d.get("upsampling_ratios") or list(reversed(d.get("downsampling_ratios", [2, 4, 8, 8])))
    return decoder_lookahead_frames(ratios)


def codec_rates(root: Path) -> tuple[int, int]:
    """The codec's sample rate and hop (samples per frame), from codec/config.json when the checkpoint
    carries its codec; DAC 44.1 kHz's published values otherwise."""
    cfg = root / "codec" / "config.json"
    if cfg.exists():
        d = json.loads(cfg.read_text())
        hop = int(math.prod(d.get("downsampling_ratios", [2, 4, 8, 8])))
        return int(d.get("sampling_rate", SAMPLE_RATE)), int(d.get("hop_length", hop))
    return SAMPLE_RATE, HOP


def model_spec(cfg: DiaConfig, root: Path, name: str) -> ModelSpec:
    sr, hop = codec_rates(root)
    return ModelSpec(
        name=name,
        sample_rate=sr,
        frame_rate=sr / hop,
        samples_per_frame=hop,
        codebooks=cfg.decoder.num_channels,
        chunk=DEFAULT_CHUNKS,
        max_context=cfg.decoder.max_position_embeddings,
        voices=(),
        languages=("english",),
        modes=("tts", "clone"),
        codec_lookahead_frames=codec_lookahead_frames(root),
    )


def describe(path: str) -> ModelSpec:
    """The spec from the checkpoint's config files alone, without torch or weights (`Family.describe`)."""
    config = Path(path) / "config.json"
    return model_spec(parse_config(read_json(config), str(config)), Path(path), Path(path).name)
