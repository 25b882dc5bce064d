"""The CosyVoice 3 oracle: upstream's pinned `cosyvoice/` package (../shared/oracle/cosyvoice3) run by the
interpreter of its own venv (scripts/setup_oracle_cosyvoice.sh), as a subprocess.

VOX_COSYVOICE_ORACLE_PYTHON (default <repo>/.oracle-cosyvoice-venv/bin/python) and VOX_COSYVOICE_UPSTREAM
(default <repo>/../shared/oracle/cosyvoice3) locate them; where either is absent the tests skip with the
reason, except under VOX_REQUIRE_ORACLE=1 (CI), where that is a failure. A clone with no ../shared beside
it (a user's) skips for the missing upstream source even then.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from .pool import run_script

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tests" / "oracle" / "run_cosyvoice.py"


def _missing(msg: str) -> None:
    if os.environ.get("VOX_REQUIRE_ORACLE") == "1":
        pytest.fail(msg)
    pytest.skip(msg)


def oracle_python() -> str:
    py = os.environ.get("VOX_COSYVOICE_ORACLE_PYTHON") or str(
        REPO / ".oracle-cosyvoice-venv" / "bin" / "python"
    )
    if not Path(py).exists():
        _missing(
            f"CosyVoice oracle interpreter {py} not found; create it with "
            "`bash scripts/setup_oracle_cosyvoice.sh .oracle-cosyvoice-venv`"
        )
    return py


def upstream_dir() -> Path:
    given = os.environ.get("VOX_COSYVOICE_UPSTREAM")
    d = Path(given or REPO.parent / "shared" / "oracle" / "cosyvoice3")
    if (d / "cosyvoice").is_dir():
        return d
    msg = f"upstream CosyVoice source {d} not found (set VOX_COSYVOICE_UPSTREAM)"
    if not given and not (REPO.parent / "shared").is_dir():
        # A user's clone has no ../shared beside it: the pinned source is the project's, not the
        # user's, so the README's test command skips these there even under VOX_REQUIRE_ORACLE=1
        # (CI always has ../shared, and there a missing source still fails).
        pytest.skip(msg + "; this clone has no ../shared beside it")
    _missing(msg)
    return d


def run_cases(ckpt: Path, cases: list[dict], work: Path, timeout: float = 1500,
              script: str = SCRIPT.name) -> dict:
    """`script`: the runner beside this file (run_cosyvoice2.py for CosyVoice 2, same venv and source)."""
    up, py = upstream_dir(), oracle_python()  # the source first: without it scripts/test.sh builds no venv
    cases_path, out = work / "cases.json", work / "oracle.pt"
    cases_path.write_text(json.dumps(cases))
    env = dict(
        os.environ,
        VOX_COSYVOICE_UPSTREAM=str(up),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONHASHSEED="0",
        OMP_NUM_THREADS="2",
        TOKENIZERS_PARALLELISM="false",
    )
    env.pop("PYTHONPATH", None)
    # cosyvoice_stubs go in before torch, so the fork server imports only what no stub touches
    proc = run_script(py, SCRIPT.parent / script, [str(ckpt), str(cases_path), str(out)], env,
                      str(SCRIPT.parent), timeout, preload=("json", "numpy", "torch"))
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:])
        pytest.fail(f"CosyVoice oracle failed ({proc.returncode}):\n{proc.stderr[-6000:]}")
    return torch.load(out, weights_only=False)


def require_audio_frontend() -> None:
    """Skip (fail under VOX_REQUIRE_ORACLE=1) where the oracle venv cannot run upstream's real audio
    frontend (a venv built before scripts/setup_oracle_cosyvoice.sh added its libraries)."""
    upstream_dir()  # the source first: without it scripts/test.sh builds no venv, and these skip
    probe = "import cosyvoice_stubs, sys; why = cosyvoice_stubs.frontend_missing(); print(why or '')"
    proc = subprocess.run(
        [oracle_python(), "-c", probe], capture_output=True, text=True, cwd=str(SCRIPT.parent), timeout=120
    )
    why = proc.stdout.strip() if proc.returncode == 0 else proc.stderr.strip()[-500:]
    if why:
        _missing(f"the CosyVoice oracle venv cannot run upstream's audio frontend: {why}")
