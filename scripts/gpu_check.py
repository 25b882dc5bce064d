#!/usr/bin/env python3
"""One short device run of the cuda backend: checks that gate, measurements that teach the simulator.

    PYTHONUNBUFFERED=1 python scripts/gpu_check.py --quick --out DIR     # <= 4 min on an H200
    PYTHONUNBUFFERED=1 python scripts/gpu_check.py --out DIR             # + SM census + calibration
    python scripts/gpu_check.py --plan [--quick]                         # the steps and budgets; CPU, seconds

The entry point the project card names; the check itself is the package benchmarks/gpu/ (its docstring
lists the steps; `python -m benchmarks.gpu` is the same command).
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout's benchmarks/ package

from benchmarks.gpu.runner import main  # noqa: E402

if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
