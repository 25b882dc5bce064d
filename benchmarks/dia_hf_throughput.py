"""What a user would run instead: transformers' own DiaForConditionalGeneration.generate, one request
after another (it has no server), on the same checkpoint, then the processor's DAC decode.

Runs under the ORACLE venv (transformers 4.57.3):

    .oracle-venv/bin/python -m benchmarks dia_hf_throughput CKPT --requests 16 --frames 64

Sampling with the checkpoint's generation config (CFG included); max_new_tokens = frames + 16 (the delay
drain and EOS), so a request yields `frames` frames unless random weights pick EOS earlier: the audio
actually produced is what counts. Prints one JSON line: wall seconds, frames, audio seconds.
"""

import argparse
import json
import os
import time

import torch
from transformers import (
    DacModel,
    DiaFeatureExtractor,
    DiaForConditionalGeneration,
    DiaProcessor,
    DiaTokenizer,
)

TEXTS = [
    "[S1] The beggar's plea, the politician's sceptre. [S2] And the drummer's ablest assistant.",
    "[S1] Get the trust fund to the bank early. [S2] Sure.",
]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--frames", type=int, default=64)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = DiaForConditionalGeneration.from_pretrained(args.ckpt).eval()
    dac = DacModel.from_pretrained(f"{args.ckpt}/codec").eval()
    proc = DiaProcessor(DiaFeatureExtractor(sampling_rate=44100, hop_length=512), DiaTokenizer(), dac)
    frames = 0
    samples = 0
    t0 = time.perf_counter()
    c0 = time.process_time()
    for i in range(args.requests):
        inputs = proc(text=[TEXTS[i % len(TEXTS)]], padding=True, return_tensors="pt")
        with torch.no_grad():
            seq = model.generate(**inputs, max_new_tokens=args.frames + 16)
            wav = proc.batch_decode(seq)[0]
        samples += int(wav.numel())
        frames += int(wav.numel()) // 512
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    print(
        json.dumps(
            {
                "wall_s": wall,
                "cpu_s": cpu,
                "frames": frames,
                "audio_s": samples / 44100,
                "requests": args.requests,
                "threads": args.threads,
            }
        )
    )


if __name__ == "__main__":
    main()
