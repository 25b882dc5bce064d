#!/usr/bin/env bash
# A real-size run (issue 23): the real Qwen3-TTS 0.6B CustomVoice architecture (random weights, 2.4 GB),
# built once and cached by the builder's version, then `vox say --max-frames 8` (no recipe: float32) and
# a 3-line `vox batch -c 2` with the model's serving recipe (dtype auto) on it, each asserting exit 0 and
# a peak RSS under a stated bound; with VOX_REALSIZE_PARITY=1 also the parity script against the
# official qwen-tts on the same weights (8 min on a loaded 2-core host: off by default). Then Kyutai TTS
# 1.6B (issue 31) the same way: built once by the pure-torch builder, cached, `vox say --max-frames 4`.
#
#   bash scripts/ci_realsize.sh            # PYTHON=.venv/bin/python, cache in ~/.cache/voxcli
#
# Environment: PYTHON (the venv's interpreter), VOX_REALSIZE_CACHE (cache dir), VOX_REALSIZE_KYUTAI_RSS_MB
# (the Kyutai say's bound, default 10000 MB), VOX_REALSIZE_RSS_MB
# (the peak-RSS bound of each vox run; default 6500 MB: measured 4.5 GB for the float32 say = 3.9 GB of
# weights plus interpreter, torch, the pools in use and workspaces, 2.5-5.0 GB for the others), and
# VOX_REALSIZE_PARITY (1: also run scripts/parity_realsize.py; needs VOX_ORACLE_PYTHON).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
CACHE=${VOX_REALSIZE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/voxcli}
BOUND=${VOX_REALSIZE_RSS_MB:-6500}
START=$(date +%s)

# The builder's version: a hash of every file that can decide the checkpoint's bytes (the builder and
# the modules whose parameter order it draws in); make_tiny.py only parses flags.
KEY=$("$PY" - <<'PYEOF'
import hashlib
import pathlib
files = sorted(pathlib.Path("models/qwen3_tts").glob("*.py"))
h = hashlib.sha256()
for f in files:
    h.update(f.name.encode() + f.read_bytes())
print(h.hexdigest()[:12])
PYEOF
)
CKPT="$CACHE/realsize-0.6b-cv-$KEY"
if [ -d "$CKPT" ]; then
  echo "real-size 0.6B CustomVoice checkpoint: cached at $CKPT"
else
  mkdir -p "$CACHE"
  # build_tiny writes into a temporary folder and renames it into place: a folder that exists is whole
  "$PY" scripts/peak_rss.py 4000 "build $CKPT" -- \
    "$PY" scripts/make_tiny.py "$CKPT" --size 0.6b --variant custom_voice
fi

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
VOX=("$PY" -m voxcli.cli)
"$PY" scripts/peak_rss.py "$BOUND" "vox say --max-frames 8" -- \
  "${VOX[@]}" say -m "$CKPT" --greedy --max-frames 8 --verbose "Hello there." -o "$WORK/say.wav"
test -s "$WORK/say.wav"
printf 'Hello there.\nHow are you today?\nThis is the third line.\n' > "$WORK/lines.txt"
# the serving recipe: its 8,192 x 64-position KV cap (120 GB in float32) is what killed this run before the
# memory plan; dtype auto (bfloat16 on this kind of CPU)
"$PY" scripts/peak_rss.py "$BOUND" "vox batch -c 2 --recipe qwen3-tts-0.6b (3 lines)" -- \
  "${VOX[@]}" batch -m "$CKPT" --recipe qwen3-tts-0.6b -c 2 --greedy --max-frames 8 --verbose \
  "$WORK/lines.txt" -o "$WORK/out"
"$PY" - "$WORK/out/manifest.jsonl" <<'PYEOF'
import json
import sys
rows = [json.loads(line) for line in open(sys.argv[1])]
done = [r for r in rows if not r.get("error")]
assert len(done) == 3, f"expected 3 finished items, manifest has {rows}"
print(f"batch manifest: {len(done)} items written")
PYEOF

# Kyutai TTS 1.6B (tts-1.6b-en_fr's published sizes in bfloat16 + moshi's fixed Mimi, random weights, 4.1 GB):
# the pure-torch builder streams it tensor by tensor (measured 544 MB peak, 2 min on a loaded 2-core host),
# cached by the package's source hash like the Qwen build; then `vox say` (float32 on a CPU without bf16:
# measured 8.3 GB peak for 7.3 GB of LM weights) until 4 frames have played (18 lead steps before the first)
KKEY=$("$PY" - <<'PYEOF'
import hashlib
import pathlib
h = hashlib.sha256()
for f in sorted(pathlib.Path("models/kyutai_tts").glob("*.py")):
    h.update(f.name.encode() + f.read_bytes())
print(h.hexdigest()[:12])
PYEOF
)
KCKPT="$CACHE/realsize-kyutai-1.6b-$KKEY"
if [ -d "$KCKPT" ]; then
  echo "real-size Kyutai TTS 1.6B checkpoint: cached at $KCKPT"
else
  "$PY" scripts/peak_rss.py 1500 "build $KCKPT" -- \
    "$PY" scripts/make_tiny.py "$KCKPT.tmp" --family kyutai_tts --size real
  mv "$KCKPT.tmp" "$KCKPT"
fi
"$PY" scripts/peak_rss.py "${VOX_REALSIZE_KYUTAI_RSS_MB:-10000}" "kyutai vox say --max-frames 4" -- \
  "${VOX[@]}" say -m "$KCKPT" --greedy --max-frames 4 --verbose "Hello there." -o "$WORK/kyutai.wav"
test -s "$WORK/kyutai.wav"
if [ "${VOX_REALSIZE_PARITY:-0}" = "1" ]; then
  "$PY" scripts/parity_realsize.py "$CKPT" --frames 8
fi
echo "ci_realsize: ok in $(( $(date +%s) - START )) s"
