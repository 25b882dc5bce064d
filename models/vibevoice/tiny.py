"""Random VibeVoice checkpoints in the released transformers layout, built by transformers' OWN classes
(`hf_build.py`, run with the VibeVoice oracle interpreter: $VOX_VIBEVOICE_ORACLE_PYTHON, else
<repo>/.oracle-vibevoice-venv/bin/python, made by `scripts/setup_oracle_vibevoice.sh`). So the layout
(names, shapes, config keys) is by construction the one transformers reads and writes.

Sizes: "tiny" (a 2-layer 64-wide LM, a 20-sample hop; its ends calibrated by hf_build.py so that a seeded
`generate` of its CALIBRATION_TEXT stops by itself after 20..60 frames) and "real" (VibeVoice-1.5B's
published dimensions, bf16, random weights: 2.7 B parameters... written by save_pretrained).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ORACLE_ENV = "VOX_VIBEVOICE_ORACLE_PYTHON"
ORACLE_VENV = ".oracle-vibevoice-venv"
SETUP = "scripts/setup_oracle_vibevoice.sh"
SIZES = ("tiny", "real")
SEED = 0
REPO = Path(__file__).resolve().parents[2]


def oracle_interpreter() -> str:
    py = os.environ.get(ORACLE_ENV) or str(REPO / ORACLE_VENV / "bin" / "python")
    if not Path(py).exists():
        raise RuntimeError(f"building a VibeVoice checkpoint needs transformers' classes: the interpreter "
                           f"{py} "
                           f"is missing; create it with `bash {SETUP}` (or set {ORACLE_ENV})")
    return py


def build_tiny(out: Path, size: str = "tiny", seed: int = SEED, max_new_tokens: int = 200,
               dtype: str | None = None) -> Path:
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    out = Path(out)
    cmd = [oracle_interpreter(), str(Path(__file__).with_name("hf_build.py")), str(out), "--size", size,
           "--seed", str(seed), "--max-new-tokens", str(max_new_tokens)]
    if dtype is not None:
        cmd += ["--dtype", dtype]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONHASHSEED="0")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"hf_build.py failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return out
