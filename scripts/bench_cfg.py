"""CFG throughput kept (decode throughput with CFG / without, at equal requests), before and after the
unconditional sequences share work (models/dia/shared_cross.py), side by side in one run:

    nice -n 10 .venv/bin/python scripts/bench_cfg.py [--requests 16,64] [--frames 64] [--repeats 2]

1. Sim (H100, Dia-1.6B, both shipped settings): one decode step's device time from the sim executor's
   own cost (SimExecutor.duration) for N requests without CFG, N CFG pairs charged 2 rows each
   (before), and N CFG pairs with the profile's cfg_row / cfg_group (after), for two text mixes:
   scripts/bench_dia.py's two texts (2 lengths: the pairs of one length share) and N distinct
   lengths (nothing shared across requests: the worst case).
2. CPU: the Dia program's decode stage (bench-size random weights, N requests of scripts/bench_dia.py's
   two texts in one batch, one torch thread, THREAD CPU time, prefill excluded), without CFG, CFG with
   `share_uncond` off (before) and on (after); see `cpu_rates` for how the shared machine's noise is
   kept out.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from bench_dia import TEXTS, checkpoint  # noqa: E402


def sim_step_ms(profile_name: str, n: int, cfg: bool, share: bool, texts: list[str]) -> float:
    from voxcli.models.base import Row, SynthesisRequest

    from voxcli.engine.cost import CostProfile
    from voxcli.engine.executors.base import Work
    from voxcli.engine.executors.sim import SimExecutor
    from voxcli.engine.lanes import LaneLayout
    from voxcli.engine.synthetic import SyntheticProgram

    profile = CostProfile.from_toml(ROOT / "recipes" / "gpus" / f"{profile_name}.toml")
    if not share:  # the same profile, every sequence a full row
        stages = dict(profile.stages, decode=replace(profile.stages["decode"], cfg_row=1.0, cfg_group=0.0))
        profile = replace(profile, stages=stages)
    program = SyntheticProgram.for_model("dia-1.6b")
    rows = [Row(i, program.prepare(SynthesisRequest(text=texts[i % len(texts)], cfg_scale=3.0 if cfg else 1.0,
                                                    fixed_frames=64)), [0]) for i in range(n)]
    width = sum(r.prompt.width for r in rows)
    layout = LaneLayout(policy="sync", lanes=("lm",), sms={"lm": None}, serialized=True)
    sim = SimExecutor(program, profile, layout)
    return sim.duration(Work(lane="lm", stage="decode", rows=rows, bucket=width)) * 1e3


def distinct_texts(n: int) -> list[str]:
    return ["[S1] " + "a" * (10 + 3 * i) + "." for i in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", default="16,64")
    ap.add_argument("--frames", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--skip-cpu", action="store_true")
    args = ap.parse_args()
    ns = [int(x) for x in args.requests.split(",")]

    print("CFG throughput kept = decode throughput with CFG / without, equal requests (goal >= 90%)")
    print("1. sim, H100, Dia-1.6B: one decode step's device time (SimExecutor.duration)")
    for prof in ("h100-dia-1.6b", "h100-optimistic-dia-1.6b"):
        for mix, texts in (("bench_dia's 2 texts", TEXTS), ("all lengths distinct", None)):
            for n in ns:
                t = texts or distinct_texts(n)
                plain = sim_step_ms(prof, n, False, False, t)
                before = sim_step_ms(prof, n, True, False, t)
                after = sim_step_ms(prof, n, True, True, t)
                print(f"  {prof:26s} {mix:21s} n={n:3d}  no CFG {plain:6.3f} ms  CFG {before:6.3f} -> "
                      f"{after:6.3f} ms   kept {plain / before:6.1%} -> {plain / after:6.1%}")
    if args.skip_cpu:
        return
    torch.set_num_threads(1)
    print(f"2. CPU, Dia bench size, {args.frames} frames, 1 thread, thread-CPU time; decode tokens/s from "
          f"the per-step minimum over {args.repeats} repeats, the 3 configurations interleaved step by step")
    for n in ns:
        rate = cpu_rates(n, args.frames, args.repeats)
        print(f"  n={n:3d}  no CFG {rate['plain']:8.1f}  CFG {rate['before']:8.1f} -> {rate['after']:8.1f}   "
              f"kept {rate['before'] / rate['plain']:6.1%} -> {rate['after'] / rate['plain']:6.1%}")


CONFIGS = {"plain": (1.0, True), "before": (3.0, False), "after": (3.0, True)}  # (cfg_scale, share_uncond)


def cpu_rates(n: int, frames: int, repeats: int) -> dict[str, float]:
    """Decode tokens per thread-CPU second for each configuration. One program (own KV pool) per
    configuration; every decode step runs once per configuration in turn, so the three see the same
    machine load at the same context length, and each step's time is its minimum over the repeats (a
    shared machine's load only ever adds time)."""
    from voxcli.models import load_model
    from voxcli.models.base import Row, SynthesisRequest

    ckpt = str(checkpoint("bench"))
    programs = {k: load_model(ckpt) for k in CONFIGS}
    best: dict[str, list[float]] = {}
    for _ in range(repeats):
        rows = {}
        for key, (w, share) in CONFIGS.items():
            prog = programs[key]
            prog.share_uncond = share
            prompts = [prog.prepare(SynthesisRequest(text=TEXTS[i % 2], cfg_scale=w, seed=i,
                                                     fixed_frames=frames)) for i in range(n)]
            prog.init_kv(1, 16)
            need = [-(-prog.kv_tokens(p) // 16) for p in prompts]
            prog.init_kv(sum(need), 16)
            start, rows[key] = 0, []
            for i, (p, k) in enumerate(zip(prompts, need, strict=True)):
                rows[key].append(Row(request_id=i, prompt=p, pages=list(range(start, start + k))))
                start += k
            prog.prefill(rows[key])
        done = False
        step = 0
        while not done:
            for key in CONFIGS:
                t0 = time.thread_time()
                outs = programs[key].decode(rows[key])
                dt = time.thread_time() - t0
                times = best.setdefault(key, [])
                if step < len(times):
                    times[step] = min(times[step], dt)
                else:
                    times.append(dt)
                done = all(o.done for o in outs)
            step += 1
    return {k: n * len(t) / sum(t) for k, t in best.items()}

if __name__ == "__main__":
    main()
