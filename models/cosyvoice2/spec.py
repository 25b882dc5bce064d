"""What a CosyVoice 2 checkpoint offers, from its files alone (cosyvoice2.yaml, spk2info.pt's keys; no
torch): what `vox voices` and the fast refusals read (`Family.describe`); the loaded program builds the
same spec."""

from __future__ import annotations

from pathlib import Path

from ..base import ModelSpec
from ..flowlm.spec import cosyvoice_dtypes, cosyvoice_spec, saved_voice_names
from .config import SPEECH_TOKENIZER, parse_config

DTYPE_POLICY = cosyvoice_dtypes()


def describe(path: str) -> ModelSpec:
    root = Path(path)
    voices = saved_voice_names(root / "spk2info.pt")
    return cosyvoice_spec(root, parse_config(root), voices, root.name, SPEECH_TOKENIZER)  # type: ignore[arg-type]


def claims(path: Path) -> bool:
    """A CosyVoice 2 folder: it holds cosyvoice2.yaml (`Family.claims`)."""
    return (Path(path) / "cosyvoice2.yaml").is_file()
