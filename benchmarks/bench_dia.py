"""Dia on the CPU, one run, printed side by side (tiny random weights; run with `nice`):

    nice -n 10 .venv/bin/python -m benchmarks bench_dia [--size bench] [--requests 8] [--frames 64]

1. Decode throughput with CFG vs without at the same number of requests: the program's decode stage
   alone (prefill excluded), N requests in one batch, one torch thread, timed in THREAD CPU time
   (`time.thread_time()`: the shared machine's other load does not count). A token here is one decoder
   position of one request (9 codes). A CFG request is a pair of sequences in the same forward pass, so
   the ratio says what guidance costs. Seed 2 (the delay-pattern paper) keeps 80%; the goal is >= 90%.
2. Time to the first aligned frame: decoder steps (16 = 1 + max delay) and their thread-CPU time.
3. The engine (cpu executor, policy full) at 16 concurrent requests vs transformers' own sequential
   `generate` + DAC decode on the same weights (oracle venv subprocess), both one torch thread, WALL time
   (the engine overlaps its lanes in threads, which thread time would not see), audio seconds per wall
   second. Both sample with the checkpoint's defaults (guidance 3).
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
TEXTS = [
    "[S1] The beggar's plea, the politician's sceptre. [S2] And the drummer's ablest assistant.",
    "[S1] Get the trust fund to the bank early. [S2] Sure.",
]


def checkpoint(size: str) -> Path:
    from voxcli.models.registry import get_tiny

    out = ROOT / ".cache" / f"dia-{size}"
    if not (out / "config.json").exists():
        get_tiny("dia").build(out, size=size)
    return out


def decode_rate(program, n: int, frames: int, cfg: float) -> tuple[float, float, int]:
    """(tokens per thread-CPU second of decode, thread-CPU seconds to the first frame, steps to it)."""
    from voxcli.models.base import Row, SynthesisRequest

    prompts = [
        program.prepare(SynthesisRequest(text=TEXTS[i % 2], cfg_scale=cfg, seed=i, fixed_frames=frames))
        for i in range(n)
    ]
    ps = 16
    program.init_kv(1, ps)
    need = [-(-program.kv_tokens(p) // ps) for p in prompts]
    program.init_kv(sum(need), ps)
    rows, start = [], 0
    for i, (p, k) in enumerate(zip(prompts, need, strict=True)):
        rows.append(Row(request_id=i, prompt=p, pages=list(range(start, start + k))))
        start += k
    t0 = time.thread_time()
    outs = program.prefill(rows)
    steps, first_t, first_steps = 1, None, None
    t1 = time.thread_time()
    tokens = 0
    while not all(o.done for o in outs):
        outs = program.decode(rows)
        steps += 1
        tokens += n
        if first_t is None and outs[0].frame is not None:
            first_t, first_steps = time.thread_time() - t0, steps
    dt = time.thread_time() - t1
    return tokens / dt, first_t or 0.0, first_steps or 0


def engine_rate(ckpt: Path, n: int, frames: int) -> dict:
    from voxcli.models import load_model
    from voxcli.models.base import SynthesisRequest

    from voxcli.config import EngineConfig
    from voxcli.engine.engine import Engine

    program = load_model(str(ckpt))
    cfg = EngineConfig(
        executor="cpu",
        policy="full",
        kv_pages=4096,
        kv_page_size=16,
        codec_slots=32,
        max_running=n,
        threads=1,
    )
    with Engine(program, cfg) as eng:
        t0, c0 = time.perf_counter(), time.process_time()
        streams = [
            eng.submit(SynthesisRequest(text=TEXTS[i % 2], seed=i, fixed_frames=frames)) for i in range(n)
        ]
        samples = sum(int(s.wait(timeout=3600).shape[0]) for s in streams)
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
    return {"wall_s": wall, "cpu_s": cpu, "audio_s": samples / 44100}


def hf_rate(ckpt: Path, n: int, frames: int) -> dict:
    py = os.environ.get("VOX_ORACLE_PYTHON") or str(ROOT / ".oracle-venv" / "bin" / "python")
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    out = subprocess.run(
        [
            py,
            str(ROOT / "benchmarks" / "dia_hf_throughput.py"),
            str(ckpt),
            "--requests",
            str(n),
            "--frames",
            str(frames),
            "--threads",
            "1",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="bench")
    ap.add_argument("--requests", type=int, default=8, help="requests in the decode batch (part 1)")
    ap.add_argument("--frames", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=16, help="engine vs transformers (part 3)")
    ap.add_argument("--skip-hf", action="store_true")
    ap.add_argument("--repeats", type=int, default=3, help="interleaved repeats of part 1 (best kept)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    ckpt = checkpoint(args.size)
    from voxcli.models import load_model

    program = load_model(str(ckpt))
    # interleaved repeats, best of each: the shared machine's noise only ever slows a run down
    runs: dict[float, list[tuple[float, float, int]]] = {1.0: [], 3.0: []}
    for _ in range(args.repeats):
        for w in runs:
            runs[w].append(decode_rate(program, args.requests, args.frames, w))
    plain, t_first1, s_first = max(runs[1.0])
    guided, t_first3, _ = max(runs[3.0])
    print(
        f"Dia {args.size} on CPU, {args.requests} requests x {args.frames} frames, 1 thread, thread-CPU "
        f"time, best of {args.repeats}"
    )
    print(
        f"  decode tokens/s   no CFG {plain:8.1f}   CFG 3 {guided:8.1f}   kept {guided / plain:6.1%}"
        "   (seed 2: 80%, goal >= 90%)"
    )
    print(
        f"  first aligned frame after {s_first} decoder steps (1 + max delay 15): "
        f"{t_first1 * 1e3:.0f} ms no CFG, {t_first3 * 1e3:.0f} ms CFG (thread CPU, batch {args.requests})"
    )
    n = args.concurrency
    ours = engine_rate(ckpt, n, args.frames)
    line = (
        f"  engine @ {n} concurrent: {ours['audio_s'] / ours['wall_s']:.3f} audio s / wall s "
        f"({ours['audio_s']:.1f} s audio in {ours['wall_s']:.1f} s)"
    )
    print(line)
    if not args.skip_hf:
        hf = hf_rate(ckpt, n, args.frames)
        print(
            f"  transformers sequential generate: {hf['audio_s'] / hf['wall_s']:.3f} audio s / wall s "
            f"({hf['audio_s']:.1f} s audio in {hf['wall_s']:.1f} s)"
        )
        ratio = (ours["audio_s"] / ours["wall_s"]) / (hf["audio_s"] / hf["wall_s"])
        print(
            f"  engine / transformers: {ratio:.1f}x (wall time, both 1 torch thread; engine lanes overlap)"
        )
        cpu_ratio = (ours["audio_s"] / ours["cpu_s"]) / (hf["audio_s"] / hf["cpu_s"])
        print(
            f"  per process-CPU second: engine {ours['audio_s'] / ours['cpu_s']:.3f}, transformers "
            f"{hf['audio_s'] / hf['cpu_s']:.3f} audio s ({cpu_ratio:.1f}x, all threads counted)"
        )


if __name__ == "__main__":
    main()
