"""Run the Orpheus oracle (transformers 5.24 + snac 1.2.1 in the venv it shares with CSM's,
scripts/setup_oracle_tf524.sh) as a subprocess: VOX_ORPHEUS_ORACLE_PYTHON, default
<repo>/.oracle-tf524-venv/bin/python. Absent: the tests
skip, except under VOX_REQUIRE_ORACLE=1 (CI), where it is a failure."""

from __future__ import annotations

import subprocess

from oracle.interpreters import oracle_python, run_oracle


def orpheus_oracle_python() -> str:
    return oracle_python(
        "VOX_ORPHEUS_ORACLE_PYTHON", ".oracle-tf524-venv", "scripts/setup_oracle_tf524.sh"
    )


def run_orpheus_oracle(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return run_oracle("run_orpheus.py", *args, timeout=timeout, python=orpheus_oracle_python())
