"""What a VibeVoice checkpoint offers, from its config alone (no torch: `vox voices` answers from
config.json; the program uses the same function, so both describe the same model).

Speakers: VibeVoice reads a script whose lines start "Speaker N:"; the release takes up to four speakers
(0..3). Without a voice sample a speaker is only that label in the prompt.

A "frame" the engine sees is one LM step's audio already decoded (the codec runs inside the LM loop):
its `hop_length` float32 samples carried bit-exact as the frame's int64 "codes" (`codebooks` = hop), which
the codec lane only unpacks. So the engine's chunking, playback deadlines and streaming work unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..base import ChunkSchedule, ModelSpec
from ..dtypes import DTYPE_NAMES, FOLLOWS, DtypePolicy, Part
from ..locate import read_json

VOICES = ("0", "1", "2", "3")
DEFAULT_VOICE = "0"
SAMPLE_RATE = 24000
# A frame is 133 ms of audio decoded in the LM step, so the codec lane costs nothing: a 1-frame first chunk
# gives the earliest first audio, then larger chunks to fewer lane passes.
DEFAULT_CHUNKS = ChunkSchedule(first=1, ramp=(2, 4), steady=8)

# One checkpoint, one dtype: the LM, the diffusion head and both tokenizers follow --dtype.
DTYPE_POLICY = DtypePolicy(parts={
    "lm": Part(FOLLOWS, ("weights",)),
}, accepts=DTYPE_NAMES)


def hop_of(raw: dict[str, Any]) -> int:
    ratios = (raw.get("audio_config") or {}).get("downsampling_ratios", (2, 2, 4, 5, 5, 8))
    hop = 1
    for r in ratios:
        hop *= int(r)
    return hop


def model_spec(raw: dict[str, Any], name: str) -> ModelSpec:
    hop = hop_of(raw)
    return ModelSpec(
        name=name,
        sample_rate=SAMPLE_RATE,
        frame_rate=SAMPLE_RATE / hop,
        samples_per_frame=hop,
        codebooks=hop,
        chunk=DEFAULT_CHUNKS,
        max_context=int((raw.get("text_config") or {}).get("max_position_embeddings", 65536)),
        voices=VOICES,
        modes=("tts",),
        split_sentences=False,  # the model reads its whole script at once (long-form, up to 90 minutes)
    )


def describe(path: str) -> ModelSpec:
    """The spec from the checkpoint's config files alone, without torch or weights (`Family.describe`)."""
    return model_spec(read_json(Path(path) / "config.json"), Path(path).name)
