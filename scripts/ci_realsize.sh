#!/usr/bin/env bash
# A real-size run (issue 23): the real Qwen3-TTS 0.6B CustomVoice architecture (random weights, 2.4 GB),
# built once and cached by the builder's version, then `vox say --max-frames 8` (no recipe: float32) and
# a 3-line `vox batch -c 2` with the model's serving recipe (dtype auto) on it, each asserting exit 0 and
# a peak RSS under a stated bound; with VOX_REALSIZE_PARITY=1 also the parity script against the
# official qwen-tts on the same weights (8 min on a loaded 2-core host: off by default). Then Kyutai TTS
# 1.6B and VibeVoice-1.5B (issue 31) the same way: built once by their pure-torch builders, cached,
# `vox say --max-frames 4` (Kyutai) and `--max-frames 2` in bfloat16 (VibeVoice).
#
#   bash scripts/ci_realsize.sh            # PYTHON=.venv/bin/python, cache in ~/.cache/voxcli
#
# Environment: PYTHON (the venv's interpreter), VOX_REALSIZE_CACHE (cache dir), VOX_REALSIZE_KYUTAI_RSS_MB
# (the Kyutai say's bound, default 10000 MB), VOX_REALSIZE_RSS_MB
# (the peak-RSS bound of each vox run; default 6500 MB: measured 4.5 GB for the float32 say = 3.9 GB of
# weights plus interpreter, torch, the pools in use and workspaces, 2.5-5.0 GB for the others), and
# VOX_REALSIZE_PARITY (1: also run scripts/parity_realsize.py; needs VOX_ORACLE_PYTHON).
set -euo pipefail
shopt -s inherit_errexit  # a failing build inside $(cached ...) stops the script
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
CACHE=${VOX_REALSIZE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/voxcli}
BOUND=${VOX_REALSIZE_RSS_MB:-6500}
START=$(date +%s)

# cached NAME PACKAGE BUILD_RSS_MB MAKE_TINY_ARGS...: the checkpoint folder of NAME, built once by
# scripts/make_tiny.py and cached under a hash of every file of PACKAGE (the builder and the modules whose
# parameter order it draws in; make_tiny.py only parses flags). It is built into NAME.tmp and renamed, so a
# folder that exists is whole; older builds of NAME (another hash) are removed: each is gigabytes.
cached() {
  local name=$1 package=$2 rss=$3; shift 3
  local key dir
  key=$("$PY" - "$package" <<'PYEOF'
import hashlib
import pathlib
import sys
h = hashlib.sha256()
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.py")):
    h.update(f.name.encode() + f.read_bytes())
print(h.hexdigest()[:12])
PYEOF
)
  dir="$CACHE/$name-$key"
  if [ -d "$dir" ]; then
    echo "real-size $name: cached at $dir" >&2
  else
    mkdir -p "$CACHE"
    find "$CACHE" -maxdepth 1 -name "$name-*" -exec rm -rf {} + >&2
    "$PY" scripts/peak_rss.py "$rss" "build $dir" -- "$PY" scripts/make_tiny.py "$dir.tmp" "$@" >&2
    mv "$dir.tmp" "$dir"
  fi
  echo "$dir"
}

CKPT=$(cached realsize-0.6b-cv models/qwen3_tts 4000 --size 0.6b --variant custom_voice)

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
KCKPT=$(cached realsize-kyutai-1.6b models/kyutai_tts 1500 --family kyutai_tts --size real)
"$PY" scripts/peak_rss.py "${VOX_REALSIZE_KYUTAI_RSS_MB:-10000}" "kyutai vox say --max-frames 4" -- \
  "${VOX[@]}" say -m "$KCKPT" --greedy --max-frames 4 --verbose "Hello there." -o "$WORK/kyutai.wav"
test -s "$WORK/kyutai.wav"
if [ "${VOX_REALSIZE_PARITY:-0}" = "1" ]; then
  "$PY" scripts/parity_realsize.py "$CKPT" --frames 8
fi
# VibeVoice-1.5B (issue 31): the released transformers layout at the published size (random weights, bf16,
# 5.4 GB in 6 shards), drawn with plain torch (models/vibevoice/torch_build.py: peak RSS 3.0 GB) and cached
# by its package's source hash; its LM picks the diffusion token every step, so `--max-frames 2` plays
# exactly 2 frames (each: 3 LM passes, 10 diffusion-head solver steps on the CFG pair, the acoustic decode
# and the semantic re-encode). Measured: peak RSS 5.1 GB in bfloat16 (9.7 GB in float32).
VV_CKPT=$(cached realsize-vibevoice-1.5b models/vibevoice 4000 --family vibevoice --size real)
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
