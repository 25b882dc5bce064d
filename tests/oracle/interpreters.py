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

from .pool import run_script

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


# What each script imports first, before any stub or shim of its own: its fork server (tests/oracle/pool.py)
# imports these once per session. Scripts not named here get numpy and torch.
# Scripts sharing a tuple share a server (run_dac.py and run_dia.py; run_csm.py and run_orpheus.py, one
# venv in CI); a transformers model module named here is one the script imports anyway, with no stub.
_DAC_DIA = ("numpy", "torch", "transformers", "transformers.models.dac.modeling_dac",
            "transformers.models.dia.modeling_dia")
_TF524 = ("numpy", "torch", "transformers", "transformers.models.llama.modeling_llama",
          "transformers.models.csm.modeling_csm", "transformers.models.mimi.modeling_mimi")
PRELOAD = {
    "run_talker.py": ("numpy", "torch", "official"),
    "run_audio.py": ("numpy", "torch", "official"),
    "run_dac.py": _DAC_DIA,
    "run_dia.py": _DAC_DIA,
    "run_csm.py": _TF524,
    "run_orpheus.py": _TF524,
    "run_speechlm.py": ("numpy", "torch", "transformers"),
    "run_speechlm_audio_in.py": ("numpy", "torch", "transformers"),  # run_speechlm's first imports
}


def run_oracle(script: str, *args: str, timeout: float = 900,
               python: str | None = None) -> subprocess.CompletedProcess:
    """Run tests/oracle/<script> with the oracle interpreter (or `python`); fail the test with its stderr."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONHASHSEED="0",
               OMP_NUM_THREADS="2", TOKENIZERS_PARALLELISM="false")
    env.pop("PYTHONPATH", None)
    proc = run_script(python or oracle_python(), ORACLE_DIR / script, list(args), env, str(ORACLE_DIR),
                      timeout, **({"preload": PRELOAD[script]} if script in PRELOAD else {}))
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:])
        pytest.fail(f"oracle script {script} failed ({proc.returncode}):\n{proc.stderr[-6000:]}")
    return proc
