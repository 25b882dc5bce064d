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
    "nari-labs/Dia-1.6B-0626",
)
DEMO = "demo"
DEMO_DIA = "demo-dia"
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
    from .qwen3_tts.tiny import build_tiny

    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".demo-", dir=root))
    try:
        # A modest cap (250 frames = 20 s) and an EOS stop rate of 0.08 per frame on the greedy path:
        # sampled runs mostly end within a few seconds (measured median ~2 s; some hit the cap).
        build_tiny(tmp / "ckpt", variant="custom_voice", max_new_tokens=250, eos_hazard=0.08)
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
    if source == DEMO_DIA:
        from .dia.demo import demo_dia_checkpoint
        from .dia.program import DiaProgram

        program = DiaProgram.load(str(demo_dia_checkpoint(cache_dir())), device=device, dtype=dtype)
        if not _demo_warned:
            log.warning("model 'demo-dia' has random weights: its audio is not speech (pipeline demo only)")
            _demo_warned = True
        program.spec = _renamed(program.spec, DEMO_DIA)
        return program
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
    if model_type == "dia":
        from .dia.program import DiaProgram

        program = DiaProgram.load(str(root), device=device, dtype=dtype)
        program.spec = _renamed(program.spec, source)
        return program
    if model_type == "qwen3_tts":
        from .qwen3_tts.program import Qwen3TTSProgram

        program = Qwen3TTSProgram.load(str(root), device=device, dtype=dtype)
        program.spec = _renamed(program.spec, source)
        return program
    raise CheckpointError(
        f"{root / 'config.json'} has model_type {json.dumps(model_type)}; "
        'voxcli serves Qwen3-TTS 12 Hz (model_type "qwen3_tts") and Dia (model_type "dia") checkpoints'
    )


def _renamed(spec, name: str):
    from dataclasses import replace

    return replace(spec, name=name)
