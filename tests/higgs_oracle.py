"""Run the Higgs Audio oracle (transformers 5.23 in its own venv, scripts/setup_oracle_higgs.sh) as a
subprocess: VOX_HIGGS_ORACLE_PYTHON, default <repo>/.oracle-higgs-venv/bin/python. Absent: the tests skip,
except under VOX_REQUIRE_ORACLE=1 (CI), where it is a failure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ORACLE_DIR = Path(__file__).resolve().parent / "oracle"


def higgs_oracle_python() -> str:
    py = os.environ.get("VOX_HIGGS_ORACLE_PYTHON") or str(REPO / ".oracle-higgs-venv" / "bin" / "python")
    if not Path(py).exists():
        msg = f"Higgs oracle interpreter {py} not found; create it with `bash scripts/setup_oracle_higgs.sh`"
        if os.environ.get("VOX_REQUIRE_ORACLE") == "1":
            pytest.fail(msg)
        pytest.skip(msg)
    return py


def run_higgs_oracle(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = dict(
        os.environ,
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONHASHSEED="0",
        OMP_NUM_THREADS="2",
        TOKENIZERS_PARALLELISM="false",
    )
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [higgs_oracle_python(), str(ORACLE_DIR / "run_higgs.py"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=str(ORACLE_DIR),
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:])
        pytest.fail(f"Higgs oracle failed ({proc.returncode}):\n{proc.stderr[-6000:]}")
    return proc
