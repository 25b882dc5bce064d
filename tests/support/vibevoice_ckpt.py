"""The tiny VibeVoice checkpoint the parity and engine tests share: built once per test session by
transformers' own classes (models/vibevoice/hf_build.py, through the VibeVoice oracle interpreter), since
the build runs transformers' generate three times to calibrate its ends."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from oracle.interpreters import oracle_python

_BUILT: dict[str, Path] = {}


def oracle() -> str:
    from voxcli.models.vibevoice.tiny import ORACLE_ENV

    py = oracle_python(ORACLE_ENV, ".oracle-vibevoice-venv", "scripts/setup_oracle_vibevoice.sh")
    os.environ.setdefault(ORACLE_ENV, py)
    return py


def tiny_checkpoint() -> Path:
    from voxcli.models.vibevoice.tiny import build_with_transformers

    oracle()
    if "tiny" not in _BUILT:
        _BUILT["tiny"] = build_with_transformers(Path(tempfile.mkdtemp(prefix="vibevoice-tiny-")) / "ckpt")
    return _BUILT["tiny"]
