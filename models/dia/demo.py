"""The offline `demo-dia` model: a tiny random-weight Dia (with its tiny DAC in codec/) built on first use
into $VOX_CACHE/demo-dia, like `demo` for Qwen3-TTS. Its audio is not speech."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

NAME = "demo-dia"
VERSION = "1"  # bump when the recipe below changes (forces a rebuild)
# Random weights almost never pick EOS: the generation config's max_length bounds a request instead
# (258 positions = 256 frames, about 3 s of audio).
MAX_LENGTH = 258


def demo_dia_checkpoint(cache: Path) -> Path:
    out = cache / NAME
    stamp = out / "VOX_DEMO_VERSION"
    if stamp.exists() and stamp.read_text().strip() == VERSION:
        return out
    from .tiny import build_tiny

    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".demo-dia-", dir=cache))
    try:
        build_tiny(tmp / "ckpt", size="tiny", max_length=MAX_LENGTH)
        (tmp / "ckpt" / "VOX_DEMO_VERSION").write_text(VERSION)
        if out.exists():
            shutil.rmtree(out)
        try:
            (tmp / "ckpt").rename(out)
        except OSError:
            if not stamp.exists():  # another process won the race with a complete build: use it
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
