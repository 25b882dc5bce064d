"""Higgs Audio v2 on the CPU, one run, printed side by side (random weights in the transformers layout; run
with `nice`):

    nice -n 10 .venv/bin/python -m benchmarks bench_higgs [--size bench] [--requests 16] [--frames 100]

1. Time to the first aligned frame: decode steps (9 = 1 + the 8-step delay fill) and their thread-CPU time,
   and the frames the codec then needs before its first sample (10: the 9.85-frame look-ahead).
2. The engine (cpu executor, policy full) at N concurrent requests vs transformers' own sequential
   `generate` + `batch_decode` on the same weights (Higgs oracle venv subprocess: VOX_HIGGS_ORACLE_PYTHON),
   greedy, `frames` frames each (random weights never pick the stream EOS), one torch thread each, WALL time
   (the engine overlaps its lanes in threads), audio seconds per wall second.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
TEXTS = ["The beggar's plea, the politician's sceptre.", "Get the trust fund to the bank early."]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="bench")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--frames", type=int, default=100)
    args = ap.parse_args()
    torch.set_num_threads(1)
    from voxcli.models import load_model
    from voxcli.models.base import Row, SamplingParams, SynthesisRequest
    from voxcli.models.registry import get_tiny

    from voxcli.config import EngineConfig
    from voxcli.engine.engine import Engine

    ckpt = ROOT / ".cache" / f"higgs-{args.size}"
    if not (ckpt / "config.json").exists():
        get_tiny("higgs").build(ckpt, size=args.size, max_new_tokens=args.frames + 8)
    program = load_model(str(ckpt))
    greedy = SamplingParams(greedy=True)

    prompt = program.prepare(SynthesisRequest(text=TEXTS[0], sampling=greedy, max_frames=args.frames))
    program.init_kv(64, 16)
    row = Row(request_id=0, prompt=prompt, pages=list(range(64)))
    t0 = time.thread_time()
    out, steps = program.prefill([row])[0], 1
    while out.frame is None:
        out, steps = program.decode([row])[0], steps + 1
    first = time.thread_time() - t0
    print(
        f"first aligned frame: after {steps} steps ({first * 1e3:.1f} ms thread CPU); the codec's first "
        f"sample needs {program.codec_model.lookahead_frames} frames "
        f"({program.codec_model.lookahead_samples} samples of look-ahead)"
    )

    cfg = EngineConfig(
        executor="cpu",
        policy="full",
        kv_pages=4096,
        kv_page_size=16,
        codec_slots=32,
        max_running=args.requests,
        threads=1,
    )
    eng = Engine(program, cfg)
    reqs = [
        SynthesisRequest(text=TEXTS[i % 2], sampling=greedy, max_frames=args.frames)
        for i in range(args.requests)
    ]
    t0 = time.perf_counter()
    streams = [eng.submit(r) for r in reqs]
    audio = sum(s.wait(timeout=3600).size for s in streams) / program.spec.sample_rate
    wall = time.perf_counter() - t0
    eng.close()
    ours = audio / wall
    print(
        f"engine, {args.requests} concurrent: {audio:.1f} s audio in {wall:.1f} s wall = {ours:.2f} audio-s/s"
    )

    py = os.environ.get("VOX_HIGGS_ORACLE_PYTHON") or str(ROOT / ".oracle-higgs-venv" / "bin" / "python")
    if not Path(py).exists():
        print(f"transformers: skipped ({py} not found; bash scripts/setup_oracle_higgs.sh)")
        return
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    res = subprocess.run(
        [
            py,
            str(ROOT / "tests" / "oracle" / "run_higgs.py"),
            "throughput",
            str(ckpt),
            str(args.requests),
            str(args.frames),
            "1",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    hf = json.loads(res.stdout.strip().splitlines()[-1])
    theirs = hf["audio_s"] / hf["wall_s"]
    print(
        f"transformers generate, sequential: {hf['audio_s']:.1f} s audio in {hf['wall_s']:.1f} s wall = "
        f"{theirs:.2f} audio-s/s"
    )
    print(f"ratio (engine / transformers): {ours / theirs:.2f}x")


if __name__ == "__main__":
    main()
