"""Kyutai TTS on the CPU: the engine at 16 concurrent requests vs moshi's own sequential generation, side by
side on the same random bench-size weights (run with `nice`):

    nice -n 10 .venv/bin/python -m benchmarks bench_kyutai [--size bench] [--concurrency 16]

The checkpoint is the pure-torch builder's (`make_tiny.py --family kyutai_tts --size bench`: a 512-wide
6-layer LM, a 256-wide depformer over the release's 32 codebooks and 11 weight sets, a 128-wide Mimi), in
float32, cached under .cache/. The engine (cpu executor, policy full, one torch thread) takes all requests at
once; moshi 0.2.13 (`TTSModel.generate` per request, then Mimi's decode: delayed-streams-modeling's
tts_pytorch.py path, benchmarks/kyutai_moshi_throughput.py in the Kyutai oracle venv, one torch thread) runs
them one after another. Both sample as tts_pytorch.py does (temp 0.6, cfg 2.0, the first voice, seed i for
request i), so lengths differ run to run: the audio each actually produced is what counts. Printed: audio
seconds per wall second and per process-CPU second (all threads counted) for both, their ratios, and the
machine's load average around each run (a shared machine's load slows wall time, not CPU time).
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
    "Hello there, this is the benchmark.",
    "The quick brown fox jumps.",
]


def checkpoint(size: str) -> Path:
    from voxcli.models.registry import get_tiny

    out = ROOT / ".cache" / f"kyutai-{size}"
    if not (out / "config.json").exists():
        get_tiny("kyutai_tts").build(out, size=size)
    return out


def engine_rate(ckpt: Path, n: int) -> dict:
    from voxcli.models import load_model
    from voxcli.models.base import SynthesisRequest

    from voxcli.config import EngineConfig
    from voxcli.engine.engine import Engine

    program = load_model(str(ckpt))
    cfg = EngineConfig(executor="cpu", policy="full", kv_pages=4096, kv_page_size=16, codec_slots=32,
                       max_running=n, threads=1)
    load0 = os.getloadavg()[0]
    with Engine(program, cfg) as eng:
        t0, c0 = time.perf_counter(), time.process_time()
        streams = [eng.submit(SynthesisRequest(text=TEXTS[i % 2], seed=i)) for i in range(n)]
        samples = sum(int(s.wait(timeout=3600).shape[0]) for s in streams)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall_s": wall, "cpu_s": cpu, "audio_s": samples / program.spec.sample_rate,
            "load": (load0, os.getloadavg()[0])}


def moshi_rate(ckpt: Path, n: int) -> dict:
    py = os.environ.get("VOX_KYUTAI_ORACLE_PYTHON") or str(ROOT / ".oracle-kyutai-venv" / "bin" / "python")
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    load0 = os.getloadavg()[0]
    out = subprocess.run([py, str(ROOT / "benchmarks" / "kyutai_moshi_throughput.py"), str(ckpt),
                          "--requests", str(n), "--threads", "1"],
                         capture_output=True, text=True, env=env, check=True)
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "load": (load0, os.getloadavg()[0])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="bench")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--skip-moshi", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    ckpt = checkpoint(args.size)
    n = args.concurrency
    print(f"Kyutai TTS {args.size} on CPU ({os.cpu_count()} cores), {n} requests, 1 torch thread each side")
    ours = engine_rate(ckpt, n)
    print(f"  engine @ {n} concurrent: {ours['audio_s'] / ours['wall_s']:.3f} audio s / wall s, "
          f"{ours['audio_s'] / ours['cpu_s']:.3f} audio s / CPU s ({ours['audio_s']:.1f} s audio in "
          f"{ours['wall_s']:.1f} s wall, {ours['cpu_s']:.1f} s CPU; load {ours['load'][0]:.1f} -> "
          f"{ours['load'][1]:.1f})")
    if args.skip_moshi:
        return
    ref = moshi_rate(ckpt, n)
    print(f"  moshi sequential generate: {ref['audio_s'] / ref['wall_s']:.3f} audio s / wall s, "
          f"{ref['audio_s'] / ref['cpu_s']:.3f} audio s / CPU s ({ref['audio_s']:.1f} s audio in "
          f"{ref['wall_s']:.1f} s wall, {ref['cpu_s']:.1f} s CPU; load {ref['load'][0]:.1f} -> "
          f"{ref['load'][1]:.1f})")
    wall = (ours["audio_s"] / ours["wall_s"]) / (ref["audio_s"] / ref["wall_s"])
    cpu = (ours["audio_s"] / ours["cpu_s"]) / (ref["audio_s"] / ref["cpu_s"])
    print(f"  engine / moshi: {wall:.1f}x per wall second, {cpu:.1f}x per CPU second")


if __name__ == "__main__":
    main()
