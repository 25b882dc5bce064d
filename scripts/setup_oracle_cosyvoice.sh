#!/usr/bin/env bash
# Create the CosyVoice 3 oracle venv: CPU torch, then what the pinned upstream `cosyvoice/` package needs
# (../shared/oracle/cosyvoice3/README.md: transformers 4.51.3 is upstream's pin). The package itself is not
# installed: tests put ../shared/oracle/cosyvoice3 on sys.path inside this interpreter.
# Upstream's audio frontend (voice cloning) runs on its real libraries (tests/oracle/cosyvoice_stubs.py):
# onnxruntime; librosa (Matcha's mel filters); openai-whisper --no-deps (only its audio.py is imported);
# torchaudio's own Python files unpacked from its wheel into VENV/torchaudio-py, NOT installed (its C
# extension does not load next to torch 2.13, and an installed torchaudio breaks transformers).
# usage: bash scripts/setup_oracle_cosyvoice.sh [VENV_DIR]   (default .oracle-cosyvoice-venv)
set -euo pipefail
venv="${1:-.oracle-cosyvoice-venv}"
check='import importlib.util as u, sys; sys.exit(0 if all(u.find_spec(m) for m in
  ("transformers", "hyperpyyaml", "x_transformers", "diffusers", "matcha", "inflect", "onnxruntime",
   "librosa", "whisper")) else 1)'
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null \
  && [ -f "$venv/torchaudio-py/torchaudio/compliance/kaldi.py" ]; then
  exit 0  # already complete
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
# torch first and pinned: a looser request would pull a CUDA build. Never install torchaudio (see above).
"$venv/bin/pip" install -q torch==2.13.0
"$venv/bin/pip" install -q transformers==4.51.3 hyperpyyaml x-transformers einops omegaconf conformer scipy \
  inflect tiktoken soundfile diffusers==0.29.0 onnxruntime librosa
# --no-deps: Matcha-TTS is an upstream git submodule; its requirements (lightning, hydra...) serve training.
# openai-whisper's (numba, triton) serve transcription; its log-mel needs only torch and numpy.
"$venv/bin/pip" install -q --no-deps matcha-tts==0.0.7.2 openai-whisper==20250625
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$venv/bin/pip" download -q --no-deps torchaudio==2.11.1 -d "$tmp"
rm -rf "$venv/torchaudio-py"
mkdir -p "$venv/torchaudio-py"
"$venv/bin/python" -c 'import sys, zipfile, glob
z = zipfile.ZipFile(glob.glob(sys.argv[1] + "/torchaudio-*.whl")[0])
z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("torchaudio/") and n.endswith(".py")])' \
  "$tmp" "$venv/torchaudio-py"
