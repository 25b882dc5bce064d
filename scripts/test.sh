#!/usr/bin/env bash
# The README's test command (CI runs it too, see .ci/run): set up .venv with the test extras and the
# oracle venv (the official qwen-tts package for the parity tests), then ruff and the whole suite.
# usage: bash scripts/test.sh [PYTEST ARGS]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
# The oracle: the official qwen-tts pins transformers 4.57.3, so it has a venv of its own. An existing
# one elsewhere (VOX_ORACLE_PYTHON) is used as it is.
if [ -z "${VOX_ORACLE_PYTHON:-}" ]; then
  bash scripts/setup_oracle.sh .oracle-venv
  export VOX_ORACLE_PYTHON="$PWD/.oracle-venv/bin/python"
fi
# Here the parity tests must run: a missing oracle is a failure, not a skip.
export VOX_REQUIRE_ORACLE="${VOX_REQUIRE_ORACLE:-1}"
.venv/bin/ruff check .
.venv/bin/python -m pytest -q "$@"
