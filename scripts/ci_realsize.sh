#!/usr/bin/env bash
# A real-size run (issue 23): the real Qwen3-TTS 0.6B CustomVoice architecture (random weights, 2.4 GB),
# built once and cached by the builder's version, then `vox say --max-frames 8` (no recipe: float32) and
# a 3-line `vox batch -c 2` with the model's serving recipe (dtype auto) on it, each asserting exit 0 and
# a peak RSS under a stated bound; with VOX_REALSIZE_PARITY=1 also the parity script against the
# official qwen-tts on the same weights (8 min on a loaded 2-core host: off by default). Then VibeVoice-1.5B
# (issue 31): built the same way, `vox say --max-frames 2` in bfloat16 under the same bound.
#
#   bash scripts/ci_realsize.sh            # PYTHON=.venv/bin/python, cache in ~/.cache/voxcli
#
# Environment: PYTHON (the venv's interpreter), VOX_REALSIZE_CACHE (cache dir), VOX_REALSIZE_RSS_MB
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
if [ "${VOX_REALSIZE_PARITY:-0}" = "1" ]; then
  "$PY" scripts/parity_realsize.py "$CKPT" --frames 8
fi
# VibeVoice-1.5B (issue 31): the released transformers layout at the published size (random weights, bf16,
# 5.4 GB in 6 shards), drawn with plain torch (models/vibevoice/torch_build.py: peak RSS 3.0 GB) and cached
# by its package's source hash; its LM picks the diffusion token every step, so `--max-frames 2` plays
# exactly 2 frames (each: 3 LM passes, 10 diffusion-head solver steps on the CFG pair, the acoustic decode
# and the semantic re-encode). Measured: peak RSS 5.1 GB in bfloat16 (9.7 GB in float32).
VV_KEY=$("$PY" - <<'PYEOF'
import hashlib
import pathlib
h = hashlib.sha256()
for f in sorted(pathlib.Path("models/vibevoice").glob("*.py")):
    h.update(f.name.encode() + f.read_bytes())
print(h.hexdigest()[:12])
PYEOF
)
VV_CKPT="$CACHE/realsize-vibevoice-1.5b-$VV_KEY"
if [ -d "$VV_CKPT" ]; then
  echo "real-size VibeVoice-1.5B checkpoint: cached at $VV_CKPT"
else
  "$PY" scripts/peak_rss.py 4000 "build $VV_CKPT" -- \
    "$PY" scripts/make_tiny.py "$VV_CKPT" --family vibevoice --size real
fi
"$PY" scripts/peak_rss.py "$BOUND" "vox say VibeVoice-1.5B bf16 --max-frames 2" -- \
  "${VOX[@]}" say -m "$VV_CKPT" --dtype bfloat16 --seed 1 --max-frames 2 --verbose "Hello there." \
  -o "$WORK/vibevoice.wav"
"$PY" - "$WORK/vibevoice.wav" <<'PYEOF'
import sys
import soundfile as sf
info = sf.info(sys.argv[1])
assert info.samplerate == 24000 and info.frames == 2 * 3200, (info.samplerate, info.frames)
print(f"VibeVoice say: {info.frames} samples (2 frames of 3200)")
PYEOF
echo "ci_realsize: ok in $(( $(date +%s) - START )) s"
