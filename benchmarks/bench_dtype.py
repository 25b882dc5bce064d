"""float32 vs bfloat16 on one checkpoint, side by side in one run (issue 23):

    python -m benchmarks bench_dtype /work/cache/realsize-0.6b-cv [--frames 24] [--compare-frames 32]

1. Throughput: audio seconds per wall second through the engine (cpu executor, the checkpoint's recipe
   settings, deadline admission), at concurrency 1 (requests one after another) and 16 (16 submitted at
   once), each request exactly --frames frames, for each dtype in turn in this process (one model
   loaded at a time).
2. Greedy codes: the same greedy request in both dtypes through the batch-1 reference path
   (models/testing/qwen3_tts_reference.generate); prints the frame index of the first code that differs
   (or that none does within --compare-frames).

Rates are per wall second and per CPU second of this process (on a shared host the wall rate moves with
the other programs' load; the CPU rate does not, as long as lanes do not sit idle waiting).

Prints one line per measurement; the ratios are within this run (same machine, same load).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time

import numpy as np


def throughput(program, frames: int, concurrency: int, requests: int) -> tuple[float, float]:
    """(audio-s per wall-s, audio-s per CPU-s of this process): on a shared host the second is the
    steadier figure (other programs take wall time, not this process's CPU time)."""
    from voxcli.models.base import SamplingParams, SynthesisRequest

    from voxcli.config import load_recipe
    from voxcli.engine.engine import Engine

    cfg = load_recipe("qwen3-tts-0.6b").replace(executor="cpu", device="cpu", admission="deadline",
                                                  dtype=_name(program.dtype))
    voice = program.spec.voices[0] if program.spec.voices else None
    with Engine(program, cfg) as engine:
        audio = 0.0
        t0, c0 = time.monotonic(), time.process_time()
        for start in range(0, requests, concurrency):
            greedy = SamplingParams(greedy=True)
            streams = [engine.submit(SynthesisRequest(text=f"Request {i}.", voice=voice, sampling=greedy,
                                                      fixed_frames=frames))
                       for i in range(start, min(requests, start + concurrency))]
            for s in streams:
                audio += len(s.wait()) / program.spec.sample_rate
        return audio / (time.monotonic() - t0), audio / (time.process_time() - c0)


def _name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def greedy_codes(program, frames: int) -> np.ndarray:
    from voxcli.models.base import SamplingParams, SynthesisRequest
    from voxcli.models.registry import get_reference

    voice = program.spec.voices[0] if program.spec.voices else None
    req = SynthesisRequest(text="Hello there, this is a comparison.", voice=voice,
                           sampling=SamplingParams(greedy=True), max_frames=frames)
    codes, _ = get_reference("qwen3_tts").generate(program, req, with_wav=False)
    return codes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--frames", type=int, default=16)
    ap.add_argument("--requests", type=int, default=16, help="requests per throughput measurement")
    ap.add_argument("--compare-frames", type=int, default=24)
    args = ap.parse_args()
    from voxcli.models import load_model

    rates: dict[str, dict[int, tuple[float, float]]] = {}
    codes: dict[str, np.ndarray] = {}
    for dtype in ("float32", "bfloat16"):
        t0 = time.monotonic()
        program = load_model(args.checkpoint, "cpu", dtype)
        print(f"{dtype}: loaded in {time.monotonic() - t0:.1f} s", flush=True)
        codes[dtype] = greedy_codes(program, args.compare_frames)
        rates[dtype] = {}
        for conc, n in ((1, 2), (16, args.requests)):
            rates[dtype][conc] = wall, cpu = throughput(program, args.frames, conc, n)
            print(f"{dtype}: concurrency {conc:2d}: {wall:.3f} audio-s per wall-s, {cpu:.3f} per CPU-s "
                  f"({n} requests x {args.frames} frames)", flush=True)
        del program
        gc.collect()
    for conc in (1, 16):
        (fw, fc), (bw, bc) = rates["float32"][conc], rates["bfloat16"][conc]
        print(f"concurrency {conc:2d}: audio-s per wall-s float32 {fw:.3f}, bfloat16 {bw:.3f} (bf16/fp32 "
              f"{bw / fw:.2f}); per CPU-s float32 {fc:.3f}, bfloat16 {bc:.3f} (bf16/fp32 {bc / fc:.2f})")
    a, b = codes["float32"], codes["bfloat16"]
    n = min(len(a), len(b))
    diff = [i for i in range(n) if not np.array_equal(a[i], b[i])]
    if diff:
        i = diff[0]
        cols = np.nonzero(a[i] != b[i])[0].tolist()
        print(f"greedy codes: bfloat16 first differs from float32 at frame {i} (codebooks {cols}); "
              f"{len(diff)} of {n} frames differ")
    else:
        print(f"greedy codes: identical for all {n} frames compared")
    return 0


if __name__ == "__main__":
    sys.exit(main())
