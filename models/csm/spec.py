"""What a CSM checkpoint offers (speakers, modes, audio rates), from its config alone (no torch: `vox voices`
answers from config.json; the program uses it too, so both describe the same model)."""

from __future__ import annotations

from pathlib import Path

from ..base import ChunkSchedule, ModelSpec
from ..dtypes import DTYPE_NAMES, FOLLOWS, DtypePolicy, Part
from ..locate import read_json
from .config import CsmConfig, parse_config

# Speakers are integers the template writes as "[N]"; the release was trained on conversations whose
# speakers are numbered from 0, so ten are offered (0 is the default).
VOICES = tuple(str(i) for i in range(10))
DEFAULT_VOICE = "0"
# Mimi is causal (no look-ahead): a 1-frame first chunk (80 ms) gives the earliest first audio; then the
# chunks grow so the codec runs fewer, larger batches once playback is buffered.
DEFAULT_CHUNKS = ChunkSchedule(first=1, ramp=(2, 4, 8), steady=10)

# The backbone, the depth decoder and Mimi follow --dtype (the exactness checks run Mimi in float64).
DTYPE_POLICY = DtypePolicy(parts={
    "lm": Part(FOLLOWS, ("weights",)),
    "codec": Part(FOLLOWS, ("codec_model",)),
}, accepts=DTYPE_NAMES)


def model_spec(cfg: CsmConfig, name: str) -> ModelSpec:
    c = cfg.codec
    return ModelSpec(
        name=name,
        sample_rate=c.sampling_rate,
        frame_rate=c.frame_rate,
        samples_per_frame=c.samples_per_frame,
        codebooks=cfg.num_codebooks,
        chunk=DEFAULT_CHUNKS,
        max_context=cfg.backbone.max_position_embeddings,
        voices=VOICES,
        modes=("tts", "clone_context"),
    )


def describe(path: str) -> ModelSpec:
    """The spec from the checkpoint's config files alone, without torch or weights (`Family.describe`)."""
    config = Path(path) / "config.json"
    return model_spec(parse_config(read_json(config), str(config)), Path(path).name)
