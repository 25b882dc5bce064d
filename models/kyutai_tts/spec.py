"""What a Kyutai TTS checkpoint offers, from its files alone (no torch: `vox voices` reads config.json and
the voice folders; the program uses the same function)."""

from __future__ import annotations

from pathlib import Path

from ..base import TEXT_STREAM, ChunkSchedule, ModelSpec
from ..dtypes import DTYPE_NAMES, FOLLOWS, DtypePolicy, Part
from ..locate import read_json
from .config import KyutaiConfig, parse_config
from .voices import voice_catalog

# Mimi is causal: a 1-frame first chunk gives the earliest audio, then growing chunks.
DEFAULT_CHUNKS = ChunkSchedule(first=1, ramp=(2, 4, 8), steady=10)
MAX_STEPS = 30000  # moshi TTSModel.max_gen_length

# The LM and Mimi follow --dtype (the exactness checks run Mimi in float64). So do the conditioners (the
# cfg / control lookup tables, the voice projection): moshi stores them in float32 but runs them under
# bfloat16 autocast, whose projections round the weights to bfloat16 as storing them so does.
DTYPE_POLICY = DtypePolicy(parts={
    "lm": Part(FOLLOWS, ("lm",)),
    "conditioner": Part(FOLLOWS, ("lm.condition_provider",)),
    "codec": Part(FOLLOWS, ("codec_model",)),
}, accepts=DTYPE_NAMES)


def model_spec(cfg: KyutaiConfig, root: Path, name: str) -> ModelSpec:
    m = cfg.mimi
    voices = voice_catalog(root, cfg.voice_suffix)
    return ModelSpec(
        name=name,
        sample_rate=m.sampling_rate,
        frame_rate=m.frame_rate,
        samples_per_frame=m.samples_per_frame,
        codebooks=cfg.n_q,
        chunk=DEFAULT_CHUNKS,
        max_context=MAX_STEPS,
        voices=voices.names(),
        voice_catalog=voices,
        languages=("en", "fr"),
        modes=("tts", TEXT_STREAM),  # reads text as it arrives (prepare(request, feed=...))
    )


def describe(path: str) -> ModelSpec:
    """The spec from the checkpoint's config files alone, without torch or weights (`Family.describe`)."""
    root = Path(path)
    return model_spec(parse_config(read_json(root / "config.json"), root), root, root.name)
