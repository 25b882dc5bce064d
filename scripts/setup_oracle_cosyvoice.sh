#!/usr/bin/env bash
# Create the CosyVoice 3 oracle venv: CPU torch, then what the pinned upstream `cosyvoice/` package needs
# (../shared/oracle/cosyvoice3/README.md: transformers 4.51.3 is upstream's pin). The package itself is not
# installed: tests put ../shared/oracle/cosyvoice3 on sys.path inside this interpreter.
# onnxruntime is not installed: upstream's frontend only needs it for the ONNX speech tokenizer and speaker
# embedding (voice cloning), and tests/oracle/cosyvoice_stubs.py stands in for it when a checkpoint has none.
# usage: bash scripts/setup_oracle_cosyvoice.sh [VENV_DIR]   (default .oracle-cosyvoice-venv)
set -euo pipefail
venv="${1:-.oracle-cosyvoice-venv}"
check='import importlib.util as u, sys; sys.exit(0 if all(u.find_spec(m) for m in
  ("transformers", "hyperpyyaml", "x_transformers", "diffusers", "matcha", "inflect")) else 1)'
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "$check" 2>/dev/null; then
  exit 0  # already complete
fi
python3 -m venv "$venv"
# torch first and pinned: a looser request would pull a CUDA build. Never torchaudio (its wheel breaks on 2.13).
"$venv/bin/pip" install -q torch==2.13.0
"$venv/bin/pip" install -q transformers==4.51.3 hyperpyyaml x-transformers einops omegaconf conformer scipy \
  inflect tiktoken soundfile diffusers==0.29.0
# --no-deps: Matcha-TTS is an upstream git submodule; its requirements (lightning, hydra...) serve training.
"$venv/bin/pip" install -q --no-deps matcha-tts==0.0.7.2
