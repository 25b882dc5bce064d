#!/usr/bin/env bash
# Create the transformers 5.24 oracle venv, shared by two references on CPU torch 2.13:
#   Orpheus 3B: LlamaForCausalLM.generate (greedy ids) and snac 1.2.1's SNAC.decode (hubertsiuzdak/snac_24khz)
#   CSM-1B:     CsmForConditionalGeneration (backbone, depth decoder, Mimi decode) and MimiModel (clone encoder)
# One venv, not two: both pin the same transformers, and neither's extra package (snac; soundfile) touches
# the other's code path. The tests reach it as VOX_ORPHEUS_ORACLE_PYTHON and VOX_CSM_ORACLE_PYTHON.
# usage: bash scripts/setup_oracle_tf524.sh [VENV_DIR]   (default .oracle-tf524-venv)
set -euo pipefail
venv="${1:-.oracle-tf524-venv}"
complete() {
  "$venv/bin/python" -c "
import sys
from importlib.metadata import version
import snac, soundfile, transformers
from transformers import CsmForConditionalGeneration, LlamaForCausalLM, MimiModel  # noqa: F401
sys.exit(0 if version('snac') == '1.2.1' and version('transformers').startswith('5.24.') else 1)" 2>/dev/null
}
if [ -x "$venv/bin/python" ] && complete; then
  exit 0  # already complete
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# torch first and pinned: a looser request would pull a multi-GB CUDA build.
"$venv/bin/python" -m pip install -q torch==2.13.0
"$venv/bin/python" -m pip install -q "transformers==5.24.*" "snac==1.2.1" numpy safetensors tokenizers soundfile
complete || { echo "setup_oracle_tf524.sh: transformers 5.24 (Csm, Llama, Mimi), snac 1.2.1 or soundfile does not import in $venv" >&2; exit 1; }
