"""VibeVoice on the CPU: the engine at 16 concurrent requests vs transformers' own sequential seeded
`generate` (one request after another, `set_seed(i)` before each) on the same bench-size random weights,
printed side by side (run with `nice`):

    nice -n 10 .venv/bin/python -m benchmarks bench_vibevoice [--concurrency 16] [--frames 24]

The checkpoint is the registered builder's "bench" size (a 4-layer 256-wide LM, a 2-layer diffusion head,
a narrow sigma-VAE codec at the release's 3,200-sample hop: 7.5 frames per second of 24 kHz audio),
built on first use under .cache/. Its LM picks the diffusion token every step, so every request of both
sides plays exactly `frames` frames. Both sides run guidance 1.3 (the token guidance pass and the
diffusion negative's) and 10 DPM-Solver steps from the checkpoint's generation_config.json, one torch
thread, in WALL time (the engine overlaps its lanes in threads, which thread time would not see) and in
process-CPU time (every thread counted). transformers runs in the VibeVoice oracle venv
($VOX_VIBEVOICE_ORACLE_PYTHON, else .oracle-vibevoice-venv) as a subprocess
(benchmarks/vibevoice_hf_throughput.py). The 1-minute load average before and after is printed: on a
shared machine it says how much the wall figures are worth.
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
    "The beggar's plea, the politician's sceptre, and the drummer's ablest assistant.",
    "Get the trust fund to the bank early.",
]


def checkpoint(size: str) -> Path:
    from voxcli.models.registry import get_tiny

    out = ROOT / ".cache" / f"vibevoice-{size}"
    if not (out / "config.json").exists():
        get_tiny("vibevoice").build(out, size=size)
    return out


def engine_rate(ckpt: Path, n: int, frames: int) -> dict:
    from voxcli.models import load_model
    from voxcli.models.base import SynthesisRequest

    from voxcli.config import EngineConfig
    from voxcli.engine.engine import Engine

    program = load_model(str(ckpt))
    # max_running counts rows: a guided request is 3 (conditional, token guidance, diffusion negative)
    cfg = EngineConfig(executor="cpu", policy="full", kv_pages=4096, kv_page_size=16, codec_slots=32,
                       max_running=3 * n, max_prefill_batch=12, threads=1)
    with Engine(program, cfg) as eng:
        t0, c0 = time.perf_counter(), time.process_time()
        requests = [SynthesisRequest(text=TEXTS[i % 2], voice=str(i % 4), seed=i, max_frames=frames)
                    for i in range(n)]
        streams = [eng.submit(r) for r in requests]
        samples = sum(int(s.wait(timeout=3600).shape[0]) for s in streams)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"wall_s": wall, "cpu_s": cpu, "audio_s": samples / 24000}


def hf_rate(ckpt: Path, n: int, frames: int) -> dict:
    venv = ROOT / ".oracle-vibevoice-venv" / "bin" / "python"
    py = os.environ.get("VOX_VIBEVOICE_ORACLE_PYTHON") or str(venv)
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    script = ROOT / "benchmarks" / "vibevoice_hf_throughput.py"
    out = subprocess.run([py, str(script), str(ckpt), "--requests", str(n), "--frames", str(frames),
                          "--threads", "1"],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", default="bench")
    ap.add_argument("--frames", type=int, default=24, help="frames per request (7.5 per audio second)")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--skip-hf", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    ckpt = checkpoint(args.size)
    n = args.concurrency
    load0 = os.getloadavg()[0]
    print(f"VibeVoice {args.size} on CPU, {n} requests x {args.frames} frames, guidance 1.3, 10 solver "
          f"steps, 1 torch thread; load average {load0:.1f} on {os.cpu_count()} cores at the start")
    ours = engine_rate(ckpt, n, args.frames)
    print(f"  engine @ {n} concurrent:           {ours['audio_s'] / ours['wall_s']:.3f} audio s / wall s "
          f"({ours['audio_s']:.1f} s audio in {ours['wall_s']:.1f} s), "
          f"{ours['audio_s'] / ours['cpu_s']:.3f} audio s / CPU s ({ours['cpu_s']:.1f} CPU s)")
    if args.skip_hf:
        return
    hf = hf_rate(ckpt, n, args.frames)
    print(f"  transformers sequential generate: {hf['audio_s'] / hf['wall_s']:.3f} audio s / wall s "
          f"({hf['audio_s']:.1f} s audio in {hf['wall_s']:.1f} s), "
          f"{hf['audio_s'] / hf['cpu_s']:.3f} audio s / CPU s ({hf['cpu_s']:.1f} CPU s)")
    if abs(hf["audio_s"] - ours["audio_s"]) > 1e-9:
        print(f"  NOTE: the two sides produced different audio lengths ({ours['audio_s']:.2f} s vs "
              f"{hf['audio_s']:.2f} s): the ratios below are per audio second")
    wall = (ours["audio_s"] / ours["wall_s"]) / (hf["audio_s"] / hf["wall_s"])
    cpu = (ours["audio_s"] / ours["cpu_s"]) / (hf["audio_s"] / hf["cpu_s"])
    print(f"  engine / transformers: {wall:.1f}x per wall second, {cpu:.1f}x per CPU second "
          f"(load average {os.getloadavg()[0]:.1f} at the end)")


if __name__ == "__main__":
    main()
