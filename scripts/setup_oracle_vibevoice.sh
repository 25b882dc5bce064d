#!/usr/bin/env bash
# Create the VibeVoice oracle venv: transformers 5.24 (VibeVoiceForConditionalGeneration,
# VibeVoiceAcousticTokenizerModel) and diffusers 0.42.1 (the DPMSolverMultistepScheduler that
# generation_config.json names) on CPU torch 2.13.
# usage: bash scripts/setup_oracle_vibevoice.sh [VENV_DIR]   (default .oracle-vibevoice-venv)
set -euo pipefail
venv="${1:-.oracle-vibevoice-venv}"
complete() {
  "$venv/bin/python" -c "
import sys
from importlib.metadata import version
ok = version('transformers').startswith('5.24.') and version('diffusers') == '0.42.1'
from transformers import VibeVoiceForConditionalGeneration  # noqa: F401
from diffusers import DPMSolverMultistepScheduler  # noqa: F401
sys.exit(0 if ok else 1)" 2>/dev/null
}
if [ -x "$venv/bin/python" ] && complete; then
  exit 0  # already complete
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# torch first and pinned: a looser request would pull a multi-GB CUDA build.
"$venv/bin/python" -m pip install -q torch==2.13.0
"$venv/bin/python" -m pip install -q "transformers==5.24.0" "diffusers==0.42.1" numpy soundfile safetensors
complete || { echo "setup_oracle_vibevoice.sh: transformers/diffusers VibeVoice classes do not import in $venv" >&2; exit 1; }
