"""The real CPU measurement: the engine on the `cpu` executor with a random-weight Qwen3-TTS, policies
`sync` and `full` swept in the same run, plus the official qwen-tts package as "what a user would run
instead" (audio seconds per wall second at concurrency 1 and 16, same weights).

    .venv/bin/python -m benchmarks bench_cpu                       # cpu-bench size, defaults below
    .venv/bin/python -m benchmarks bench_cpu --size tiny --dilation 1 --rates 0.5:3:0.5

Output lengths are fixed from the workload (the word-count estimator), so random weights cannot run
away. `--dilation K` measures on a clock K times slower (see voxcli/bench/targets.py dilated_program):
the SLO thresholds are then 200*K ms / 10*K ms of wall time and the report says so; K = 1 is the product
SLO. The default, `--dilation auto`, measures one request's real-time factor here first and picks K from
it (voxcli/bench/dilation.py), so both policies are compared in their working range on a slow or a fast
machine alike; `--rates auto` sweeps around the measured one-at-a-time capacity. Both are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from voxcli.bench.dilation import HEADROOM, auto_rates, choose_dilation, sequential_capacity
from voxcli.bench.report import capacity_table, plot, rate_tables, table_console, write_json
from voxcli.bench.sweep import SweepResult, SweepSpec, Variant, parse_rates, sweep_variant
from voxcli.bench.targets import EngineTarget, dilate, dilated_program
from voxcli.bench.workloads import estimate_frames, load_workload
from voxcli.config import EngineConfig

ROOT = Path(__file__).resolve().parent.parent


def checkpoint(size: str) -> Path:
    from voxcli.models.registry import get_tiny

    out = ROOT / ".cache" / f"qwen3-tts-{size}"
    if not (out / "config.json").exists():
        get_tiny("qwen3_tts").build(out, variant="custom_voice", size=size)
    return out


def our_throughput(program, config: EngineConfig, n: int, frames: int) -> dict:
    """N requests submitted at once to the engine (policy full); audio seconds per wall second."""
    from voxcli.models.base import SynthesisRequest

    from voxcli.engine.engine import Engine

    texts = [
        "The beggar's plea, the politician's sceptre and the drummer's ablest assistant.",
        "Get the trust fund to the bank early.",
    ]
    with Engine(program, config.replace(policy="full")) as engine:
        t0 = time.perf_counter()
        streams = [
            engine.submit(
                SynthesisRequest(text=texts[i % 2], voice=program.spec.voices[0], fixed_frames=frames, seed=i)
            )
            for i in range(n)
        ]
        audio = sum(len(s.wait()) for s in streams) / program.spec.sample_rate
        wall = time.perf_counter() - t0
    return {
        "system": "voxcli",
        "concurrency": n,
        "audio_s": round(audio, 3),
        "wall_s": round(wall, 3),
        "audio_s_per_wall_s": round(audio / wall, 4),
    }


def qwen_throughput(ckpt: Path, concurrency: str, frames: int, threads: int) -> list[dict]:
    py = os.environ.get("VOX_ORACLE_PYTHON") or str(ROOT / ".oracle-venv" / "bin" / "python")
    if not Path(py).exists():
        print(f"qwen-tts comparison skipped: no oracle interpreter at {py} (bash scripts/setup_oracle.sh)")
        return []
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [
            py,
            str(ROOT / "benchmarks" / "qwen_tts_throughput.py"),
            str(ckpt),
            "--concurrency",
            concurrency,
            "--frames",
            str(frames),
            "--threads",
            str(threads),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"qwen-tts throughput run failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="cpu-bench", choices=("cpu-bench", "tiny"))
    ap.add_argument("--rates", default="auto", help="start:stop:step, a list, or auto (around the "
                    "measured one-at-a-time capacity)")
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--dilation", default="auto", help="clock dilation K, or auto (from the measured "
                    "single-stream real-time factor)")
    ap.add_argument("--workload", default="seed-tts")
    ap.add_argument("--frames-scale", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--frames", type=int, default=60, help="frames per request in the throughput comparison")
    ap.add_argument("--concurrency", default="1,16")
    ap.add_argument("--skip-sweep", action="store_true")
    ap.add_argument("--skip-throughput", action="store_true")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bench-cpu")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="engine override (repeatable), e.g. --set chunk.first=2")
    args = ap.parse_args()
    console = table_console()
    import torch

    torch.set_num_threads(args.threads)
    from voxcli.models import load_model

    t0 = time.perf_counter()
    ckpt = checkpoint(args.size)
    program = load_model(str(ckpt), "cpu", "float32")
    config = EngineConfig(
        model=str(ckpt), executor="cpu", device="cpu", threads=args.threads, chunk=program.spec.chunk
    ).with_overrides(args.set)
    summary: dict = {
        "size": args.size,
        "dilation": None,  # set below (auto: from the measured single-stream RTF)
        "workload": args.workload,
        "chunk": str(config.chunk),
    }
    if not args.skip_throughput:
        ours = [our_throughput(program, config, int(n), args.frames) for n in args.concurrency.split(",")]
        theirs = qwen_throughput(ckpt, args.concurrency, args.frames, args.threads)
        summary["throughput"] = ours + theirs
        for row in ours + theirs:
            console.print(
                f"{row['system']:9s} concurrency {row['concurrency']:3d}: {row['audio_s_per_wall_s']:.3f} "
                f"audio s per wall s ({row['audio_s']:.1f} s audio in {row['wall_s']:.1f} s)"
            )
    if not args.skip_sweep:
        utts = load_workload(args.workload)
        rtf = None
        if args.dilation == "auto" or args.rates == "auto":
            rtf = single_stream_rtf(program, config, args.frames)
            summary["single_stream_rtf"] = round(rtf, 4)
            console.print(f"single-stream real-time factor here: {rtf:.3f} wall s per audio s "
                          f"({args.frames} frames, policy full, after one warm-up request)")
        k = choose_dilation(rtf) if args.dilation == "auto" else float(args.dilation)
        summary["dilation"] = k
        if args.rates == "auto":
            mean_audio = sum(estimate_frames(u.text) for u in utts) / len(utts) * args.frames_scale / 12.5
            cap = sequential_capacity(rtf, mean_audio)
            rates = auto_rates(cap)
            console.print(f"one-at-a-time capacity ~{cap:.3g} req/s ({mean_audio:.2f} s audio per request); "
                          f"rates {', '.join(f'{r:g}' for r in rates)}")
        else:
            rates = parse_rates(args.rates)
        console.print(f"dilation {k:g}" + (f" (auto: {HEADROOM:g} x RTF {rtf:.3f}, rounded up to a half)"
                                           if args.dilation == "auto" else " (given)"))
        spec = SweepSpec(
            rates=rates,
            duration_s=args.duration,
            warmup=args.warmup,
            timeout_s=600.0,
            frames_scale=args.frames_scale,
            ttfa_target_s=0.2 * k,
            stall_s=0.01 * k,
        )
        prog = dilated_program(program, k)
        sweeps = []
        for policy in ("sync", "full"):
            v = Variant.policy(policy)
            target = EngineTarget(_engine(prog, dilate(config, k).replace(policy=policy)), policy)
            try:
                sweeps.append(
                    sweep_variant(
                        target,
                        v,
                        spec,
                        utts,
                        lambda sw, r: console.print(
                            f"[dim]{sw.variant.label} {r.rate:g} req/s: {r.attainment * 100:.0f}% "
                            f"p99 TTFA {(r.ttfa_p99 or 0) * 1e3:.0f} ms[/dim]"
                        ),
                    )
                )
            finally:
                target.close()
        result = SweepResult(spec, sweeps, {"executor": "cpu", **summary})
        for t in rate_tables(result):
            console.print(t)
        console.print(capacity_table(result))
        caps = {s.variant.label: (s.capacity90, s.capacity99) for s in sweeps}
        full, sync = caps["full"][0], caps["sync"][0]
        # A ratio only means something when sync holds the SLO at some rate.
        ratio = f"{full / sync:.2f}" if sync else "undefined: sync met the SLO at no tested rate"
        console.print(
            f"capacity@90%: full {full:g} vs sync {sync:g} req/s "
            f"(ratio {ratio}); dilation {k:g} (SLO {200 * k:g} ms TTFA, {10 * k:g} ms stall)"
        )
        summary["capacity"] = caps
        write_json(result, args.out / "bench-cpu.json")
        try:
            plot(result, args.out / "bench-cpu.png", f"cpu, Qwen3-TTS {args.size}, dilation {k:g}")
        except ImportError:
            console.print("no plot: plots need matplotlib (pip install -e '.[plot]')")
    (args.out).mkdir(parents=True, exist_ok=True)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    console.print(f"total {time.perf_counter() - t0:.0f} s")
    return 0


def single_stream_rtf(program, config: EngineConfig, frames: int) -> float:
    """Wall seconds per audio second of one request alone (after one uncounted warm-up request)."""
    from voxcli.models.base import SynthesisRequest

    from voxcli.engine.engine import Engine

    text = "Get the trust fund to the bank early."
    with Engine(program, config.replace(policy="full")) as engine:
        voice = program.spec.voices[0]
        engine.submit(SynthesisRequest(text=text, voice=voice, fixed_frames=8, seed=0)).wait()
        t0 = time.perf_counter()
        pcm = engine.submit(SynthesisRequest(text=text, voice=program.spec.voices[0], fixed_frames=frames,
                                             seed=1)).wait()
        wall = time.perf_counter() - t0
    return wall / (len(pcm) / program.spec.sample_rate)


def _engine(program, config):
    from voxcli.engine.engine import Engine

    return Engine(program, config)


if __name__ == "__main__":
    sys.exit(main())
