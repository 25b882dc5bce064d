"""A CosyVoice 3 checkpoint's ModelSpec from its files alone (`vox voices` answers without torch), as the
loaded program builds it (models/flowlm/spec.py)."""

from __future__ import annotations

from pathlib import Path

from ..base import ModelSpec
from ..flowlm.spec import SPEECH_TOKENIZER, cosyvoice_spec, saved_voice_names
from .config import parse_config

__all__ = ["SPEECH_TOKENIZER", "describe"]


def describe(path: str) -> ModelSpec:
    root = Path(path)
    return cosyvoice_spec(root, parse_config(root), saved_voice_names(root / "spk2info.pt"), root.name)


def claims(path: Path) -> bool:
    """A CosyVoice 3 folder: it holds cosyvoice3.yaml (`Family.claims`)."""
    return (Path(path) / "cosyvoice3.yaml").is_file()
