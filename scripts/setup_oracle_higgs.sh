#!/usr/bin/env bash
# Create the Higgs Audio oracle venv: transformers 5.23 (HiggsAudioV2* classes) on CPU torch 2.13, and
# torchaudio 2.11 without its compiled extensions: its wheels' .so files fail to load under torch 2.13, but
# `torchaudio.functional.resample` (the audio tokenizer's 24 -> 16 kHz step in `encode`) is plain torch and
# imports once they are gone.
# usage: bash scripts/setup_oracle_higgs.sh [VENV_DIR]   (default .oracle-higgs-venv)
set -euo pipefail
venv="${1:-.oracle-higgs-venv}"
complete() {
  "$venv/bin/python" -c "
import importlib.util as u, sys
from importlib.metadata import version
ok = u.find_spec('transformers') and version('transformers').startswith('5.23.')
import torch, torchaudio.functional as F
sys.exit(0 if ok and F.resample(torch.zeros(1, 30), 24000, 16000).shape[-1] == 20 else 1)" 2>/dev/null
}
if [ -x "$venv/bin/python" ] && complete; then
  exit 0  # already complete
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# torch first and pinned: a looser request would pull a multi-GB CUDA build.
"$venv/bin/python" -m pip install -q torch==2.13.0
"$venv/bin/python" -m pip install -q "transformers==5.23.*" numpy soundfile
"$venv/bin/python" -m pip install -q --no-deps torchaudio==2.11.0
site="$("$venv/bin/python" -c 'import torchaudio, os; print(os.path.dirname(torchaudio.__file__))' 2>/dev/null || \
  "$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"] + "/torchaudio")')"
rm -f "$site"/lib/*.so
complete || { echo "setup_oracle_higgs.sh: torchaudio.functional.resample does not work in $venv" >&2; exit 1; }
