"""Run scripts under the oracle venv (official qwen-tts 0.1.1 + transformers 4.57.3).

The oracle has its own interpreter because qwen-tts pins transformers; `scripts/setup_oracle.sh`
creates it. Without it the parity tests skip, except where VOX_REQUIRE_ORACLE=1 (CI), where a missing
oracle is a failure: parity must never silently disappear.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ORACLE_DIR = Path(__file__).resolve().parent


def oracle_python(env: str = "VOX_ORACLE_PYTHON", venv: str = ".oracle-venv",
                  setup: str = "scripts/setup_oracle.sh") -> str:
    """The interpreter of an oracle venv: `$env`, else `<repo>/<venv>/bin/python` (other oracles, e.g.
    ESPnet's SpeechLM: VOX_SPEECHLM_ORACLE_PYTHON / .oracle-speechlm-venv / setup_oracle_speechlm.sh)."""
    py = os.environ.get(env) or str(REPO / venv / "bin" / "python")
    if not Path(py).exists():
        msg = f"oracle interpreter {py} not found; create it with `bash {setup}` (or set {env})"
        if os.environ.get("VOX_REQUIRE_ORACLE") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return py


def run_oracle(script: str, *args: str, timeout: float = 900,
               python: str | None = None) -> subprocess.CompletedProcess:
    """Run tests/oracle/<script> with the oracle interpreter (or `python`); fail the test with its stderr."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONHASHSEED="0",
               OMP_NUM_THREADS="2", TOKENIZERS_PARALLELISM="false")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([python or oracle_python(), str(ORACLE_DIR / script), *args], capture_output=True,
                          text=True, timeout=timeout, env=env, cwd=str(ORACLE_DIR))
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:])
        pytest.fail(f"oracle script {script} failed ({proc.returncode}):\n{proc.stderr[-6000:]}")
    return proc
