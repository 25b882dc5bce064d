#!/usr/bin/env bash
# Create the Orpheus oracle venv: transformers 5.24 (LlamaForCausalLM.generate, the reference for Orpheus 3B's
# greedy ids) and snac 1.2.1 (hubertsiuzdak/snac_24khz's SNAC.decode, the reference for its waveform) on CPU
# torch 2.13.
# usage: bash scripts/setup_oracle_orpheus.sh [VENV_DIR]   (default .oracle-orpheus-venv)
set -euo pipefail
venv="${1:-.oracle-orpheus-venv}"
complete() {
  "$venv/bin/python" -c "
import sys
from importlib.metadata import version
import snac, transformers
from transformers import LlamaForCausalLM
sys.exit(0 if version('snac') == '1.2.1' and version('transformers').startswith('5.24.') else 1)" 2>/dev/null
}
if [ -x "$venv/bin/python" ] && complete; then
  exit 0  # already complete
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# torch first and pinned: a looser request would pull a multi-GB CUDA build.
"$venv/bin/python" -m pip install -q torch==2.13.0
"$venv/bin/python" -m pip install -q "transformers==5.24.*" "snac==1.2.1" numpy safetensors tokenizers
complete || { echo "setup_oracle_orpheus.sh: transformers 5.24 or snac 1.2.1 does not import in $venv" >&2; exit 1; }
