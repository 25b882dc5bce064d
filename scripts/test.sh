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
# scripts/oracle_plan.py decides, one line per oracle: use the interpreter its variable names, build its
# venv, or skip it where its pinned upstream source (../shared/oracle/...) is absent, as on a user's clone:
# those parity tests then skip, naming the missing source, so their venvs (over 1 GB each) would go unused.
plan="$(python3 scripts/oracle_plan.py)"
while IFS=$'\t' read -r action var a b; do
  case "$action" in
    use) ;;
    build)
      bash "scripts/$b" "$a"
      export "$var=$PWD/$a/bin/python" ;;
    skip) echo "test.sh: $a" >&2 ;;
    *) echo "test.sh: unexpected oracle plan line: $action" >&2; exit 1 ;;
  esac
done <<< "$plan"
# Here the parity tests must run: a missing oracle interpreter is a failure, not a skip (pytest alone, without
# this variable, skips them). A missing pinned source on a clone without ../shared still skips.
export VOX_REQUIRE_ORACLE="${VOX_REQUIRE_ORACLE:-1}"
.venv/bin/ruff check .
.venv/bin/python -m pytest -q "$@"
