"""What fault isolation costs: the batch in which one row's data makes a stage raise (found by re-running
its rows in parts, voxcli/engine/isolation.py) against the same stage's batch of 8 good rows, side by side
in one process, on the tiny Qwen3-TTS checkpoint (real stages, sim executor for a deterministic batch
composition). Host time is thread CPU time (the machine is shared).

    .venv/bin/python -m benchmarks isolation_cost [--repeats 3]

Prints per stage: the good batch's time, the failing batch's time, their ratio, and the re-run count;
then the whole run (8 requests) with and without the bad row.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

from voxcli.models.base import SamplingParams, SynthesisRequest

import voxcli.sim.executor as sim_mod
from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.engine import Engine

BAD_SAMPLING = {"prefill": {"top_k": 10 ** 30}, "decode": {"sub_top_k": 10 ** 30},
                "codec": {"temperature": 1e-300, "greedy": False}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    from voxcli.models import load_model
    from voxcli.models.registry import get_tiny

    root = Path(tempfile.mkdtemp(prefix="vox-iso-")) / "tiny"
    get_tiny("qwen3_tts").build(root, variant="custom_voice")
    program = load_model(str(root))
    timed: list[tuple[str, int, int, float]] = []  # (stage, rows, reruns, thread seconds)
    inner = sim_mod.run_work_isolated

    def timed_run(prog, work):
        t0 = time.thread_time()
        out = inner(prog, work)
        timed.append((work.stage, len(work.rows), out.reruns, time.thread_time() - t0))
        return out

    sim_mod.run_work_isolated = timed_run
    prepare = program.prepare
    bad_change: dict = {}

    def corrupting_prepare(request):
        prompt = prepare(request)
        if request.request_id == "bad":
            prompt.data.sampling = dataclasses.replace(prompt.data.sampling, **bad_change)
        return prompt

    program.prepare = corrupting_prepare
    voices = program.spec.voices
    reqs = [SynthesisRequest(text=f"request {i} says hello", voice=voices[i % len(voices)], seed=i,
                             sampling=SamplingParams(greedy=i % 2 == 0), fixed_frames=16,
                             request_id="bad" if i == 3 else f"good{i}") for i in range(8)]
    cfg = EngineConfig(executor="sim", policy="full", chunk=ChunkSchedule(first=4, ramp=(), steady=4),
                       kv_pages=512, kv_page_size=16, codec_slots=12, max_running=16, max_prefill_batch=8,
                       background_min_batch=8, threads=1)

    def run(change: dict) -> tuple[float, list]:
        bad_change.clear()
        bad_change.update(change)
        timed.clear()
        eng = Engine(program, cfg)
        t0 = time.thread_time()
        streams = [eng.submit(r, at=0.0) for r in reqs]
        eng.run()
        total = time.thread_time() - t0
        eng.close()
        assert sum(s.status == "done" for s in streams) >= 7, [(s.status, s.reason) for s in streams]
        return total, list(timed)

    print(f"{'stage':8} {'good batch ms':>14} {'failing batch ms':>17} {'ratio':>6} {'re-runs':>8} "
          f"{'run ms (good)':>14} {'run ms (1 bad)':>15}")
    for stage, change in BAD_SAMPLING.items():
        good_b, bad_b, good_t, bad_t, reruns = [], [], [], [], 0
        for _ in range(args.repeats):  # alternate, so drift on the shared host hits both sides alike
            t, calls = run({})
            good_t.append(t)
            good_b += [s for st, n, _, s in calls if st == stage and n == 8]
            t, calls = run(change)
            bad_t.append(t)
            hit = [(r, s) for st, n, r, s in calls if st == stage and r > 0]
            assert hit, f"no {stage} batch was isolated"
            reruns = hit[0][0]
            bad_b.append(hit[0][1])
        g, b = statistics.median(good_b) * 1e3, statistics.median(bad_b) * 1e3
        print(f"{stage:8} {g:14.2f} {b:17.2f} {b / g:6.2f} {reruns:8d} "
              f"{statistics.median(good_t) * 1e3:14.1f} {statistics.median(bad_t) * 1e3:15.1f}")


if __name__ == "__main__":
    main()
