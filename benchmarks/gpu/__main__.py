"""`python -m benchmarks.gpu`: gpu_check (scripts/gpu_check.py is the same entry point)."""

import os
import sys

from benchmarks.gpu.runner import main

os.environ.setdefault("PYTHONUNBUFFERED", "1")
sys.exit(main())
