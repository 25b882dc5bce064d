#!/usr/bin/env bash
# Create the Zonos oracle venv: what upstream Zonos (../shared/oracle/zonos, commit bc40d98) needs to run its
# transformer variant on CPU torch 2.13: transformers 5.23 (its DAC is transformers' DacModel), phonemizer
# with espeak-ng from the espeakng-loader wheel (libespeak-ng + its data; no Debian package needed),
# inflect and kanjize (text normalisation), and torchaudio 2.11 without its compiled extensions (its wheels'
# .so files fail to load under torch 2.13; upstream imports it at module level and uses only its plain-torch
# resample and mel transforms). sudachipy (Japanese only) is not installed: tests/oracle/zonos_shims stands in.
# usage: bash scripts/setup_oracle_zonos.sh [VENV_DIR]   (default .oracle-zonos-venv)
set -euo pipefail
venv="${1:-.oracle-zonos-venv}"
complete() {
  "$venv/bin/python" -c "
import importlib.util as u, sys
from importlib.metadata import version
ok = all(u.find_spec(m) for m in ('transformers', 'phonemizer', 'espeakng_loader', 'inflect', 'kanjize'))
ok = ok and version('transformers').startswith('5.23.')
import torch, torchaudio.functional as F
sys.exit(0 if ok and F.resample(torch.zeros(1, 30), 24000, 16000).shape[-1] == 20 else 1)" 2>/dev/null
}
if [ -x "$venv/bin/python" ] && complete; then
  exit 0  # already complete
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# torch first and pinned: a looser request would pull a multi-GB CUDA build.
"$venv/bin/python" -m pip install -q torch==2.13.0
"$venv/bin/python" -m pip install -q "transformers==5.23.*" numpy safetensors huggingface_hub tqdm \
  "inflect>=7.5" "kanjize>=1.5" "phonemizer>=3.3" "espeakng-loader>=0.2.4"
"$venv/bin/python" -m pip install -q --no-deps torchaudio==2.11.0
site="$("$venv/bin/python" -c 'import torchaudio, os; print(os.path.dirname(torchaudio.__file__))' 2>/dev/null || \
  "$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"] + "/torchaudio")')"
rm -f "$site"/lib/*.so
complete || { echo "setup_oracle_zonos.sh: the Zonos oracle venv $venv is incomplete" >&2; exit 1; }
