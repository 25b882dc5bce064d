#!/usr/bin/env bash
# The README's first command: set up .venv and speak with the offline demo model into a WAV file.
# usage: bash scripts/quickstart.sh ["Text to say."] [OUT.wav]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/vox say -m demo "${1:-Hello there.}" -o "${2:-hello.wav}"
echo "next: source .venv/bin/activate; vox --help"
