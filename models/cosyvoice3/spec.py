"""A CosyVoice 3 checkpoint's ModelSpec from its files alone (`vox voices` answers without torch), as the
loaded program builds it (models/flowlm/spec.py)."""

from __future__ import annotations

from pathlib import Path

from ..base import ModelSpec
from ..dtypes import AtLeast, Part
from ..flowlm.spec import SPEECH_TOKENIZER, cosyvoice_dtypes, cosyvoice_spec, saved_voice_names
from .config import parse_config

__all__ = ["DTYPE_POLICY", "SPEECH_TOKENIZER", "describe"]

# Upstream runs CausalConvRNNF0Predictor in float64 whatever the rest runs in.
DTYPE_POLICY = cosyvoice_dtypes(
    {"f0_predictor": Part(AtLeast("float64"), ("codec_stage.hift.w.f0_predictor",))}
)


def describe(path: str) -> ModelSpec:
    root = Path(path)
    return cosyvoice_spec(root, parse_config(root), saved_voice_names(root / "spk2info.pt"), root.name)


def claims(path: Path) -> bool:
    """A CosyVoice 3 folder: it holds cosyvoice3.yaml (`Family.claims`)."""
    return (Path(path) / "cosyvoice3.yaml").is_file()
