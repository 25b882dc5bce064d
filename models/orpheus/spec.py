"""What an Orpheus checkpoint offers, from its config files alone (no torch: `vox voices` reads it)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..base import ChunkSchedule, ModelSpec
from ..codecs.snac.config import context_samples
from ..dtypes import FOLLOWS, DtypePolicy, Part
from ..locate import read_json
from .config import parse_config
from .tokens import FRAME_TOKENS, VOICES

SAMPLE_RATE = 24000
SAMPLES_PER_FRAME = 2048  # snac_24khz: hop 512 x the coarsest level's stride 4 (85.3 ms)
HOLD_FRAMES = 3  # the "whole" mode's hold-back for snac_24khz (codec.py: 5,636 samples of context)
# A frame is 7 LM steps and SNAC needs 4 frames before the first audio in either mode, so chunk 0 is 4 frames
# (28 steps; "whole" plays 1 of them); then small chunks while the buffer is one frame deep, growing to 16.
DEFAULT_CHUNKS = ChunkSchedule(first=4, ramp=(1, 2, 4, 8), steady=16)

# The Llama backbone and SNAC follow --dtype.
DTYPE_POLICY = DtypePolicy(parts={
    "lm": Part(FOLLOWS, ("weights",)),
    "codec": Part(FOLLOWS, ("codec_model.net",)),
})


def codec_rates(codec_config: Path | None) -> tuple[int, int, float]:
    """(sample rate, samples per frame, hold-back frames) from a SNAC config.json when at hand, snac_24khz's
    published values otherwise (the codec itself is found, or refused clearly, on first use)."""
    if codec_config is None or not codec_config.exists():
        return SAMPLE_RATE, SAMPLES_PER_FRAME, float(HOLD_FRAMES)
    d = json.loads(codec_config.read_text())
    hop = math.prod(d.get("encoder_rates", [2, 4, 8, 8]))
    spf = hop * d.get("vq_strides", [4, 2, 1])[0]
    hold = math.ceil(context_samples(hop, d.get("decoder_rates", [8, 8, 4, 2])) / spf)
    return int(d.get("sampling_rate", SAMPLE_RATE)), spf, float(hold)


def model_spec(
    name: str, max_context: int, codec_config: Path | None, hold_frames: float | None = None
) -> ModelSpec:
    sr, spf, hold = codec_rates(codec_config)
    return ModelSpec(
        name=name,
        sample_rate=sr,
        frame_rate=sr / spf,
        samples_per_frame=spf,
        codebooks=FRAME_TOKENS,
        chunk=DEFAULT_CHUNKS,
        max_context=max_context,
        voices=VOICES,
        languages=("english",),
        modes=("tts",),
        codec_lookahead_frames=hold if hold_frames is None else hold_frames,
    )


def describe(path: str) -> ModelSpec:
    """The spec from the checkpoint's config files alone, without torch or weights (`Family.describe`)."""
    root = Path(path)
    cfg = parse_config(read_json(root / "config.json"), str(root / "config.json"))
    codec = root / "codec" / "config.json"
    return model_spec(root.name, cfg.max_position_embeddings, codec if codec.exists() else None)
