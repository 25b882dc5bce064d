"""Benchmark the Qwen3-TTS 12 Hz codec decoder: streaming batches through the slot table vs one full
forward, on the "cpu-bench" random speech tokenizer (real 2048 codebook, moderate widths).

usage: python -m benchmarks bench_codec [--size cpu-bench] [--chunk 10] [--repeats 5] [--threads 2]
Prints, per batch size, the median wall time of one decode_chunks call and the audio it produced
(x realtime = audio seconds / compute seconds).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from voxcli.models import load_model
from voxcli.models.base import CodecItem
from voxcli.models.registry import get_tiny


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="cpu-bench")
    ap.add_argument("--chunk", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        # the size's whole random checkpoint (the talker too: the registry builds checkpoints, not parts);
        # the program's codec loads from its speech_tokenizer/
        get_tiny("qwen3_tts").build(Path(tmp), size=args.size)
        codec = load_model(tmp, args.device, "float32").codec_model
    cfg = codec.cfg
    rng = np.random.RandomState(0)
    frame_s = codec.samples_per_frame / 24000
    print(
        f"codec size={args.size} params={sum(p.numel() for p in codec.parameters()) / 1e6:.2f}M "
        f"threads={args.threads} device={args.device} chunk={args.chunk} frames"
    )
    for batch in (1, 4, 16):
        codec.init_slots(batch)
        times = []
        for r in range(args.repeats + 1):  # the first call warms up and is not counted
            items = [
                CodecItem(b, rng.randint(0, cfg.codebook_size, (args.chunk, 16)), first=r == 0, last=False)
                for b in range(batch)
            ]
            t0 = time.perf_counter()
            codec.decode_chunks(items)
            if r:
                times.append(time.perf_counter() - t0)
        t = statistics.median(times)
        audio = batch * args.chunk * frame_s
        print(
            f"stream  batch={batch:2d} x {args.chunk} frames: {t * 1e3:8.1f} ms/call  "
            f"{audio / t:6.1f}x realtime  ({t * 1e3 / (batch * args.chunk):.2f} ms/frame)"
        )
    for frames in (args.chunk, 16 * args.chunk):
        codes = torch.from_numpy(rng.randint(0, cfg.codebook_size, (1, 16, frames)))
        codec.full_forward(codes)
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            codec.full_forward(codes)
            times.append(time.perf_counter() - t0)
        t = statistics.median(times)
        print(
            f"full    1 x {frames:4d} frames:        {t * 1e3:8.1f} ms/call  "
            f"{frames * frame_s / t:6.1f}x realtime  "
            f"({t * 1e3 / frames:.2f} ms/frame)"
        )


if __name__ == "__main__":
    main()
