"""Random VibeVoice checkpoints in the released transformers layout, two ways:

- `build_tiny` (the registered builder: `scripts/make_tiny.py --family vibevoice`, the demo, the benchmark,
  the real-size runs): plain torch in this interpreter (torch_build.py), sizes "tiny" (ends calibrated
  with our own program), "bench" and "real" (VibeVoice-1.5B's published dimensions, bf16, 2.7 B
  parameters written shard by shard); tests/test_vibevoice_build.py checks its tiny against the next one.
- `build_with_transformers` (the parity tests' checkpoint): transformers' OWN classes (`hf_build.py`, run
  with the VibeVoice oracle interpreter: $VOX_VIBEVOICE_ORACLE_PYTHON, else
  <repo>/.oracle-vibevoice-venv/bin/python, made by `scripts/setup_oracle_vibevoice.sh`), so its layout
  is by construction the one transformers reads and writes; sizes "tiny" (ends calibrated with
  transformers' generate) and "real" (save_pretrained in float32 first: about 16 GB).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ORACLE_ENV = "VOX_VIBEVOICE_ORACLE_PYTHON"
ORACLE_VENV = ".oracle-vibevoice-venv"
SETUP = "scripts/setup_oracle_vibevoice.sh"
SIZES = ("tiny", "bench", "real")  # the torch builder's (layout.SIZES)
HF_SIZES = ("tiny", "real")
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
    from .torch_build import build

    return build(Path(out), size=size, seed=seed, max_new_tokens=max_new_tokens, dtype=dtype)


def build_with_transformers(out: Path, size: str = "tiny", seed: int = SEED, max_new_tokens: int = 200,
                            dtype: str | None = None) -> Path:
    if size not in HF_SIZES:
        raise ValueError(f"size must be one of {', '.join(HF_SIZES)}, got {size!r}")
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
