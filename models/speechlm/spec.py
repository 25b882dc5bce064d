"""A SpeechLM checkpoint's ModelSpec, built the same way for a loaded program and from the config files
alone (`describe`: `vox voices` answers without torch; tests/test_startup.py checks they agree)."""

from __future__ import annotations

from pathlib import Path

from ..base import ChunkSchedule, ModelSpec
from ..dtypes import FLOAT32_AT_LEAST, FOLLOWS, DtypePolicy, Fixed, Part
from .codec_files import codec_rates
from .config import SpeechLMConfig, load_config

# X-Codec at 50 frames/s: a 10-frame first chunk (200 ms), then larger chunks once playback is buffered.
DEFAULT_CHUNKS = ChunkSchedule(first=10, ramp=(25,), steady=50)

# The LM follows --dtype; the X-Codec / ESPnet DAC decoder and X-Codec's encoder keep float32 (as ESPnet
# runs its codec), and so does the LM's unused `vocab_weight` (training loss weights, float32 in the file).
DTYPE_POLICY = DtypePolicy(parts={
    "lm": Part(FOLLOWS, ("lm",)),
    "vocab_weight": Part(Fixed("float32"), ("lm.vocab_weight",)),
    "codec": Part(FLOAT32_AT_LEAST, ("codec_model.net",)),
    "encoder": Part(FLOAT32_AT_LEAST, ()),
})


def speechlm_spec(cfg: SpeechLMConfig, name: str) -> ModelSpec:
    sr, hop = codec_rates(cfg)
    return ModelSpec(name=name, sample_rate=sr, frame_rate=sr / hop, samples_per_frame=hop,
                     codebooks=max(1, cfg.layout.codec_streams), chunk=DEFAULT_CHUNKS,
                     max_context=cfg.backbone.block.max_position_embeddings, modes=("tts",),
                     split_sentences=False)  # one prompt per text, as the task template builds it


def describe(path: str) -> ModelSpec:
    root = Path(path).expanduser()
    return speechlm_spec(load_config(root), root.name)
