#!/usr/bin/env bash
# Create (or complete) the project venv .venv: CPU torch pinned first, then voxcli with EXTRAS.
# usage: bash scripts/setup.sh [EXTRAS]      e.g. bash scripts/setup.sh test
# Needs only python3 (3.11+); safe to run again (pip skips what is installed).
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-}"
python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "voxcli needs Python 3.11 or newer")'
[ -x .venv/bin/python ] || python3 -m venv .venv
# torch first and pinned: a looser request would pull a multi-GB CUDA build.
.venv/bin/pip install -q torch==2.13.0
.venv/bin/pip install -q -e ".${extras:+[$extras]}"
