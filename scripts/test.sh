#!/usr/bin/env bash
# The README's test command (CI runs it too, see .ci/run): set up .venv with the test extras and the
# oracle venvs (the reference implementations the parity tests compare against), then ruff and the suite.
# usage: bash scripts/test.sh [PYTEST ARGS]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
# Each oracle pins its own transformers (or espnet), so each has a venv of its own. One that exists
# elsewhere (its VOX_*_ORACLE_PYTHON) is used as it is.
#   .oracle-venv          official qwen-tts 0.1.1 + transformers 4.57.3 (Qwen3-TTS, Dia, DAC)
#   .oracle-higgs-venv    transformers 5.23 (Higgs Audio v2)
#   .oracle-speechlm-venv espnet 202611 + transformers 5.14.1 (ESPnet SpeechLM: Bagpiper / OpusLM)
#   .oracle-cosyvoice-venv what upstream CosyVoice 3 (../shared/oracle/cosyvoice3) needs to run
#   .oracle-tf524-venv    transformers 5.24 + snac 1.2.1: Orpheus 3B (SNAC 24 kHz) and CSM-1B share it
#   .oracle-zonos-venv    what upstream Zonos (../shared/oracle/zonos) needs: transformers 5.23, phonemizer
#   .oracle-kyutai-venv   moshi 0.2.13 (Kyutai TTS: moshi.models.tts.TTSModel, moshi's Mimi)
#   .oracle-vibevoice-venv transformers 5.24 + diffusers 0.42.1 (VibeVoice, DPMSolverMultistepScheduler)
oracle() {  # ENV_VAR VENV_DIR SETUP_SCRIPT
  if [ -z "${!1:-}" ]; then
    bash "scripts/$3" "$2"
    export "$1=$PWD/$2/bin/python"
  fi
}
oracle VOX_ORACLE_PYTHON .oracle-venv setup_oracle.sh
oracle VOX_HIGGS_ORACLE_PYTHON .oracle-higgs-venv setup_oracle_higgs.sh
oracle VOX_SPEECHLM_ORACLE_PYTHON .oracle-speechlm-venv setup_oracle_speechlm.sh
oracle VOX_COSYVOICE_ORACLE_PYTHON .oracle-cosyvoice-venv setup_oracle_cosyvoice.sh
oracle VOX_ORPHEUS_ORACLE_PYTHON .oracle-tf524-venv setup_oracle_tf524.sh
oracle VOX_ZONOS_ORACLE_PYTHON .oracle-zonos-venv setup_oracle_zonos.sh
oracle VOX_CSM_ORACLE_PYTHON .oracle-tf524-venv setup_oracle_tf524.sh
oracle VOX_KYUTAI_ORACLE_PYTHON .oracle-kyutai-venv setup_oracle_kyutai.sh
oracle VOX_VIBEVOICE_ORACLE_PYTHON .oracle-vibevoice-venv setup_oracle_vibevoice.sh
# Here the parity tests must run: a missing oracle is a failure, not a skip.
export VOX_REQUIRE_ORACLE="${VOX_REQUIRE_ORACLE:-1}"
.venv/bin/ruff check .
.venv/bin/python -m pytest -q "$@"
