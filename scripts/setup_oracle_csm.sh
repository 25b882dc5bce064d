#!/usr/bin/env bash
# Create the CSM-1B oracle venv: transformers 5.24 (CsmForConditionalGeneration, whose generate() runs the
# backbone, the depth decoder and the Mimi decode, and MimiModel for the voice-clone encoder) on CPU torch 2.13.
# usage: bash scripts/setup_oracle_csm.sh [VENV_DIR]   (default .oracle-csm-venv)
set -euo pipefail
venv="${1:-.oracle-csm-venv}"
complete() {
  "$venv/bin/python" -c "
import sys
from importlib.metadata import version
from transformers import CsmForConditionalGeneration, MimiModel  # noqa: F401
sys.exit(0 if version('transformers').startswith('5.24.') else 1)" 2>/dev/null
}
if [ -x "$venv/bin/python" ] && complete; then
  exit 0  # already complete
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# torch first and pinned: a looser request would pull a multi-GB CUDA build.
"$venv/bin/python" -m pip install -q torch==2.13.0
"$venv/bin/python" -m pip install -q "transformers==5.24.*" numpy soundfile
complete || { echo "setup_oracle_csm.sh: transformers 5.24 lacks CsmForConditionalGeneration or MimiModel in $venv" >&2; exit 1; }
