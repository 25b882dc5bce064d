#!/usr/bin/env bash
# Create the Higgs Audio oracle venv: transformers 5.23 (HiggsAudioV2* classes) on CPU torch 2.13.
# usage: bash scripts/setup_oracle_higgs.sh [VENV_DIR]   (default .oracle-higgs-venv)
# No torchaudio: its 2.11 wheels' .so fails to load under torch 2.13, and the Higgs classes do not need it.
set -euo pipefail
venv="${1:-.oracle-higgs-venv}"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "
import importlib.util as u, sys
from importlib.metadata import version
sys.exit(0 if u.find_spec('transformers') and version('transformers').startswith('5.23.') else 1)" 2>/dev/null; then
  exit 0  # already complete
fi
python3 -m venv "$venv"
# torch first and pinned: a looser request would pull a multi-GB CUDA build.
"$venv/bin/pip" install -q torch==2.13.0
"$venv/bin/pip" install -q "transformers==5.23.*" numpy soundfile
