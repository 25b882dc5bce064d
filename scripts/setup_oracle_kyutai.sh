#!/usr/bin/env bash
# Create the Kyutai TTS oracle venv: moshi 0.2.13 (moshi.models.tts.TTSModel) on CPU torch 2.13.
# moshi pins torch<2.10 and sounddevice/bitsandbytes/aiohttp it does not need for the TTS path, so it is
# installed with --no-deps and its real dependencies for models/, conditioners/, modules/ and tts.py
# (numpy, safetensors, huggingface-hub, einops, sentencepiece, sphn, tqdm) are installed beside it.
# usage: bash scripts/setup_oracle_kyutai.sh [VENV_DIR]   (default .oracle-kyutai-venv)
set -euo pipefail
venv="${1:-.oracle-kyutai-venv}"
complete() {
  "$venv/bin/python" -c "
import sys, torch
from importlib.metadata import version
from moshi.models.tts import TTSModel  # noqa: F401
sys.exit(0 if version('moshi') == '0.2.13' and torch.__version__.startswith('2.13.') else 1)" 2>/dev/null
}
if [ -x "$venv/bin/python" ] && complete; then
  exit 0  # already complete
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# torch first and pinned: a looser request would pull a multi-GB CUDA build.
"$venv/bin/python" -m pip install -q torch==2.13.0
"$venv/bin/python" -m pip install -q --no-deps moshi==0.2.13
"$venv/bin/python" -m pip install -q "numpy>=1.26,<2.3" "safetensors>=0.4,<0.8" "huggingface-hub>=0.24,<1.0" \
  "einops>=0.7,<0.9" "sentencepiece>=0.2,<0.3" "sphn>=0.2,<0.3" "tqdm>=4.48"
complete || { echo "setup_oracle_kyutai.sh: moshi 0.2.13 does not import in $venv" >&2; exit 1; }
