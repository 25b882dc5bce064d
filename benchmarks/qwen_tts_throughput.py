"""What a user would run instead: the official `qwen-tts` package generating on the same checkpoint.

Runs under the ORACLE venv (qwen-tts 0.1.1 pins transformers 4.57.3):

    .oracle-venv/bin/python -m benchmarks qwen_tts_throughput CKPT --concurrency 1,16 --frames 60

For each concurrency N it calls `generate_custom_voice` once with N texts (the package's own batching;
it has no server), sampling with the checkpoint's defaults, and prints one JSON line per N: audio
seconds produced per wall second (generation + codec decode, the package's whole call). Random weights
may stop early at EOS, so the audio actually produced is what counts.
"""

import argparse
import json
import os
import time

# isort: off
from tests.oracle import official  # imports qwen_tts offline, before torch (as this script always did)
import torch
# isort: on

TEXTS = [
    "The beggar's plea, the politician's sceptre and the drummer's ablest assistant.",
    "Get the trust fund to the bank early.",
    "One by one, the campfires were extinguished.",
    "The boy knew the desert sensed his fear.",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("--concurrency", default="1,16")
    ap.add_argument("--frames", type=int, default=60, help="max_new_tokens (frames) per request")
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "2")))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    tts = official.Qwen3TTSModel.from_pretrained(args.ckpt, dtype=torch.float32, device_map="cpu")
    speakers = sorted(tts.model.get_supported_speakers())
    for n in (int(x) for x in args.concurrency.split(",")):
        texts = [TEXTS[i % len(TEXTS)] for i in range(n)]
        t0 = time.perf_counter()
        wavs, sr = tts.generate_custom_voice(
            text=texts, speaker=[speakers[0]] * n, language=["English"] * n, max_new_tokens=args.frames
        )
        wall = time.perf_counter() - t0
        audio = sum(len(w) for w in wavs) / sr
        print(
            json.dumps(
                {
                    "system": "qwen-tts",
                    "concurrency": n,
                    "audio_s": round(audio, 3),
                    "wall_s": round(wall, 3),
                    "audio_s_per_wall_s": round(audio / wall, 4),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
