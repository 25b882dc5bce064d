"""Run the Higgs Audio oracle (transformers 5.23 in its own venv, scripts/setup_oracle_higgs.sh) as a
subprocess: VOX_HIGGS_ORACLE_PYTHON, default <repo>/.oracle-higgs-venv/bin/python. Absent: the tests skip,
except under VOX_REQUIRE_ORACLE=1 (CI), where it is a failure."""

from __future__ import annotations

import subprocess

from oracle.interpreters import oracle_python, run_oracle


def higgs_oracle_python() -> str:
    return oracle_python("VOX_HIGGS_ORACLE_PYTHON", ".oracle-higgs-venv", "scripts/setup_oracle_higgs.sh")


def run_higgs_oracle(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return run_oracle("run_higgs.py", *args, timeout=timeout, python=higgs_oracle_python())
