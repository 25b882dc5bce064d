"""A CPU install never imports flashinfer or cuda.bindings: the cuda backend loads them lazily."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MODULES = ["voxcli.engine.executors.cuda", "voxcli.engine.executors.cuda_ops", "voxcli.engine.partitions",
           "voxcli.models.paged_attention"]


def test_backend_modules_import_without_gpu_libraries():
    modules = list(MODULES)
    if (Path(__file__).resolve().parents[1] / "voxcli" / "cli.py").exists():
        modules.append("voxcli.cli")
    code = (
        "import sys\n"
        + "".join(f"import {m}\n" for m in modules)
        + "bad = sorted(m for m in sys.modules if m == 'flashinfer' or m.startswith(('flashinfer.', "
          "'cuda.bindings')) or m == 'cuda')\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"imported at module load: {out.stdout.strip()}"
