#!/usr/bin/env bash
# Create the ESPnet SpeechLM oracle venv: espnet==202611 (espnet2/speechlm ParallelLLM) on CPU torch 2.13
# and transformers 5.14.1. Its wheel declares Python >= 3.12 but runs on 3.11, so it is downloaded for 3.12
# and installed without its (training/recipe) requirements; its inference imports need only the packages
# below (einops, typeguard, humanfriendly, torch_complex: what espnet2/gan_codec's DAC imports, for the
# DAC codec parity). liger_kernel (training loss) and librosa (the codec's mel losses) are stubbed by the
# oracle scripts. torchaudio 2.11 comes without its compiled extensions (its .so files fail to load under
# torch 2.13): `torchaudio.functional.resample`, which the audio IO's preprocess calls for a clip at another
# rate (the audio-in parity), is plain torch and imports once they are gone.
# usage: bash scripts/setup_oracle_speechlm.sh [VENV_DIR]   (default .oracle-speechlm-venv); idempotent.
set -euo pipefail
venv="${1:-.oracle-speechlm-venv}"
complete() {
  "$venv/bin/python" -c "
import importlib.util as u, sys
ok = all(u.find_spec(m) for m in ('espnet2', 'transformers', 'einops', 'typeguard', 'humanfriendly', 'torch_complex'))
import torch, torchaudio.functional as F
sys.exit(0 if ok and F.resample(torch.zeros(1, 30), 24000, 16000).shape[-1] == 20 else 1)" 2>/dev/null
}
if [ -x "$venv/bin/python" ] && complete; then
  exit 0  # already complete
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# torch first and pinned: a looser request would pull a CUDA build.
"$venv/bin/pip" install -q torch==2.13.0
"$venv/bin/pip" install -q transformers==5.14.1 numpy joblib pyyaml tokenizers safetensors \
  einops typeguard humanfriendly torch_complex
dl="$(mktemp -d)"
trap 'rm -rf "$dl"' EXIT
"$venv/bin/pip" download -q --no-deps --python-version 3.12 --only-binary=:all: espnet==202611 -d "$dl"
"$venv/bin/pip" install -q --no-deps --ignore-requires-python "$dl"/espnet-202611-*.whl
"$venv/bin/pip" install -q --no-deps torchaudio==2.11.0
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"] + "/torchaudio")')"
rm -f "$site"/lib/*.so
complete || { echo "setup_oracle_speechlm.sh: the venv is incomplete (torchaudio.functional.resample?)" >&2; exit 1; }
