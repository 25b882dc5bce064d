"""What a Zonos checkpoint offers, from its files alone (no torch): `vox voices` and the program agree."""

from __future__ import annotations

import json
from pathlib import Path

from ..base import ChunkSchedule, ModelSpec
from ..codecs.dac.config import decoder_lookahead_frames
from ..dtypes import FOLLOWS, DtypePolicy, Fixed, Part
from ..voices import VoiceCatalog, voice_folders
from .text import LANGUAGES

SAMPLE_RATE = 44100
HOP = 512
MAX_CONTEXT = 16384  # the reference's rotary table (precompute_freqs_cis(16384, ...))
DEFAULT_MAX_FRAMES = 86 * 30  # the reference's generate(max_new_tokens=86 * 30): 30 s
# DAC 44.1 kHz holds back 4757 samples (9.29 frames) of look-ahead: as for Dia, a 12-frame first chunk plays
# 2.7 frames and the chunks then grow with the buffered audio (recipes/zonos-v0.1.toml).
DEFAULT_CHUNKS = ChunkSchedule(first=12, ramp=(4, 6, 10, 16, 24, 40), steady=48)
DAC_RATIOS = (8, 8, 4, 2)

# The backbone, its conditioners and the DAC codec follow --dtype; the speaker embedder (read on the
# first clone) runs in float32, as the reference's.
DTYPE_POLICY = DtypePolicy(parts={
    "lm": Part(FOLLOWS, ("weights",)),
    "codec": Part(FOLLOWS, ("codec_model.net",)),
    "speaker_encoder": Part(Fixed("float32"), ()),
})


def speaker_catalog(root: Path) -> VoiceCatalog:
    """Saved speaker embeddings (`<voice>.npy`, 128 floats each, as the reference's speaker model + LDA make
    them) in the checkpoint's `speakers/` folder or `$VOX_VOICES_DIR`, by name; by path from the CLI."""
    return VoiceCatalog(folders=voice_folders(Path(root) / "speakers"), suffix=".npy", path_suffix=".npy")


def model_spec(root: Path, name: str) -> ModelSpec:
    voices = speaker_catalog(root)
    return ModelSpec(
        name=name,
        sample_rate=SAMPLE_RATE,
        frame_rate=SAMPLE_RATE / HOP,
        samples_per_frame=HOP,
        codebooks=9,
        chunk=DEFAULT_CHUNKS,
        max_context=MAX_CONTEXT,
        voices=voices.names(),
        voice_catalog=voices,
        languages=LANGUAGES,
        modes=("tts", "clone"),  # clone: a speaker embedding from --ref-audio (speaker_model.py)
        codec_lookahead_frames=decoder_lookahead_frames(DAC_RATIOS),
    )


def describe(path: str) -> ModelSpec:
    """The spec from the checkpoint's config files alone, without torch or weights (`Family.describe`)."""
    return model_spec(Path(path), Path(path).name)


def claims(path: Path) -> bool:
    """A Zonos folder (`Family.claims`): a config.json with Zonos' `backbone` and `prefix_conditioner` and
    no model_type."""
    cfg = Path(path) / "config.json"
    if not cfg.is_file():
        return False
    try:
        d = json.loads(cfg.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(d, dict) and "model_type" not in d and "backbone" in d and "prefix_conditioner" in d
