#!/usr/bin/env bash
# Create the oracle venv: the official qwen-tts 0.1.1 (pins transformers 4.57.3) on CPU torch.
# usage: bash scripts/setup_oracle.sh [VENV_DIR]   (default .oracle-venv)
set -euo pipefail
venv="${1:-.oracle-venv}"
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import importlib.util as u, sys; sys.exit(0 if u.find_spec('qwen_tts') and u.find_spec('transformers') else 1)" 2>/dev/null; then
  exit 0  # already complete
fi
python3 -m venv "$venv"
"$venv/bin/pip" install -q torch==2.13.0 transformers==4.57.3 accelerate==1.12.0 einops soundfile librosa
# --no-deps: its own requirements (gradio, onnxruntime, sox...) serve only the 25 Hz tokenizer and UI.
"$venv/bin/pip" install -q --no-deps qwen-tts==0.1.1
