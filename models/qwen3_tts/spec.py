"""What a Qwen3-TTS checkpoint offers (voices, languages, modes, audio rates), from its config alone.
No torch: `vox voices` builds this from config.json without loading weights; the program uses it too,
so both always describe the same model."""

from __future__ import annotations

from pathlib import Path

from ..base import ChunkSchedule, ModelSpec
from ..dtypes import FOLLOWS, DtypePolicy, Part
from ..locate import read_json
from .config import Qwen3TTSConfig, parse_config

SAMPLE_RATE = 24000
SAMPLES_PER_FRAME = 1920
# Codec chunks: a 1-frame first chunk gives the earliest first audio (80 ms of audio per frame), then
# the chunks grow so the codec runs fewer, larger (more efficient) batches once playback is buffered.
DEFAULT_CHUNKS = ChunkSchedule(first=1, ramp=(2, 4, 8), steady=10)
MODES = {"custom_voice": ("custom_voice",), "voice_design": ("voice_design",),
         "base": ("clone_xvec", "clone_icl")}

# Every part follows --dtype (the speaker encoder, read on the first clone, too).
DTYPE_POLICY = DtypePolicy(parts={
    "lm": Part(FOLLOWS, ("weights",)),
    "codec": Part(FOLLOWS, ("codec_model.decoder",)),
    "speaker_encoder": Part(FOLLOWS, ()),
})


def model_spec(cfg: Qwen3TTSConfig, name: str) -> ModelSpec:
    tc = cfg.talker
    return ModelSpec(
        name=name,
        sample_rate=SAMPLE_RATE,
        frame_rate=SAMPLE_RATE / SAMPLES_PER_FRAME,
        samples_per_frame=SAMPLES_PER_FRAME,
        codebooks=tc.num_code_groups,
        chunk=DEFAULT_CHUNKS,
        max_context=tc.block.max_position_embeddings,
        voices=tuple(sorted(tc.speaker_ids)),
        languages=cfg.languages,
        modes=MODES.get(cfg.model_type, (cfg.model_type,)),
    )


def describe(path: str) -> ModelSpec:
    """The spec from the checkpoint's config files alone, without torch or weights (`Family.describe`)."""
    config = Path(path) / "config.json"
    return model_spec(parse_config(read_json(config), str(config)), Path(path).name)
