"""Model programs, one per family. `voxcli.models` is this folder (see pyproject package-dir).

`load_model(source)` picks the program from the checkpoint's config.json `model_type`. The alias
"demo" is a tiny random-weight Qwen3-TTS CustomVoice checkpoint generated on first use into
$VOX_CACHE/demo (default ~/.cache/voxcli/demo), so the whole pipeline runs offline. Its audio is not
speech: the weights are random.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

from .base import CheckpointError, ModelProgram

log = logging.getLogger(__name__)

KNOWN_MODELS: tuple[str, ...] = (
    "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice",
    "Qwen/Qwen3-TTS-12Hz-0.6B-Base",
    "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice",
    "Qwen/Qwen3-TTS-12Hz-1.7B-Base",
    "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign",
)
DEMO = "demo"
DEMO_VERSION = "3"  # bump when the demo checkpoint's recipe changes (forces a rebuild)
_demo_warned = False


def cache_dir() -> Path:
    return Path(os.environ.get("VOX_CACHE") or Path.home() / ".cache" / "voxcli")


def demo_checkpoint() -> Path:
    """Build the demo checkpoint once (in a temp dir, then an atomic rename) and return its path."""
    root = cache_dir()
    out = root / DEMO
    stamp = out / "VOX_DEMO_VERSION"
    if stamp.exists() and stamp.read_text().strip() == DEMO_VERSION:
        return out
    from .qwen3_tts.demo import build_demo

    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".demo-", dir=root))
    try:
        build_demo(tmp / "ckpt")  # from the shipped calibration: seconds, not the ~20 s of calibrating
        (tmp / "ckpt" / "VOX_DEMO_VERSION").write_text(DEMO_VERSION)
        if out.exists():
            shutil.rmtree(out)
        try:
            (tmp / "ckpt").rename(out)
        except OSError:
            if not (stamp.exists()):  # another process won the race with a complete build: use it
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def load_model(source: str, device: str = "cpu", dtype: str = "float32") -> ModelProgram:
    """A local checkpoint directory, a hub id in the local cache, or "demo"."""
    global _demo_warned
    if source == DEMO:
        path = demo_checkpoint()
        if not _demo_warned:
            log.warning("model 'demo' has random weights: its audio is not speech (pipeline demo only)")
            _demo_warned = True
        from .qwen3_tts.program import Qwen3TTSProgram

        program = Qwen3TTSProgram.load(str(path), device=device, dtype=dtype)
        program.spec = _renamed(program.spec, DEMO)
        return program
    from .qwen3_tts.checkpoint import read_json, resolve

    root = resolve(source)
    model_type = read_json(root / "config.json").get("model_type")
    if model_type == "qwen3_tts":
        from .qwen3_tts.program import Qwen3TTSProgram

        program = Qwen3TTSProgram.load(str(root), device=device, dtype=dtype)
        program.spec = _renamed(program.spec, source)
        return program
    raise CheckpointError(
        f"{root / 'config.json'} has model_type {json.dumps(model_type)}; "
        'voxcli serves Qwen3-TTS 12 Hz checkpoints (model_type "qwen3_tts")'
    )


def _renamed(spec, name: str):
    from dataclasses import replace

    return replace(spec, name=name)
