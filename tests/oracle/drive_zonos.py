"""The Zonos oracle: upstream's pinned `zonos/` package (../shared/oracle/zonos, commit bc40d98) run by the
interpreter of its own venv (scripts/setup_oracle_zonos.sh), as a subprocess (tests/oracle/run_zonos.py).

VOX_ZONOS_ORACLE_PYTHON (default <repo>/.oracle-zonos-venv/bin/python) and VOX_ZONOS_UPSTREAM (default
<repo>/../shared/oracle/zonos) locate them; where either is absent the tests skip with the reason, except
under VOX_REQUIRE_ORACLE=1 (CI), where that is a failure. A clone with no ../shared beside it (a user's)
skips for the missing upstream source even then.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .interpreters import REPO, oracle_python

SCRIPT = REPO / "tests" / "oracle" / "run_zonos.py"


def upstream_dir() -> Path:
    given = os.environ.get("VOX_ZONOS_UPSTREAM")
    d = Path(given or REPO.parent / "shared" / "oracle" / "zonos")
    if (d / "zonos" / "model.py").is_file():
        return d
    msg = f"upstream Zonos source {d} not found (set VOX_ZONOS_UPSTREAM)"
    if not given and not (REPO.parent / "shared").is_dir():
        pytest.skip(msg + "; this clone has no ../shared beside it")
    if os.environ.get("VOX_REQUIRE_ORACLE") == "1":
        pytest.fail(msg)
    pytest.skip(msg)
    return d


def run_zonos(ckpt: Path, sizes: dict, cases: list[dict], work: Path, timeout: float = 900) -> dict:
    """Build the checkpoint at `ckpt` with upstream's classes and generate `cases`; the results by name."""
    import torch

    up = upstream_dir()
    py = oracle_python("VOX_ZONOS_ORACLE_PYTHON", ".oracle-zonos-venv", "scripts/setup_oracle_zonos.sh")
    (work / "sizes.json").write_text(json.dumps(sizes))
    (work / "cases.json").write_text(json.dumps(cases))
    env = dict(
        os.environ,
        VOX_ZONOS_UPSTREAM=str(up),
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        PYTHONHASHSEED="0",
        OMP_NUM_THREADS="2",
        TOKENIZERS_PARALLELISM="false",
    )
    env.pop("PYTHONPATH", None)
    out = work / "oracle.pt"
    proc = subprocess.run(
        [py, str(SCRIPT), str(ckpt), str(work / "sizes.json"), str(work / "cases.json"), str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=str(SCRIPT.parent),
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:])
        pytest.fail(f"Zonos oracle failed ({proc.returncode}):\n{proc.stderr[-6000:]}")
    return torch.load(out, weights_only=False)
