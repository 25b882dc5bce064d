"""Where a CFG pair's extra decode time goes on the CPU, per op (issue 17 part 6), side by side in one run:

    nice -n 10 .venv/bin/python -m benchmarks profile_cfg [--requests 16,64] [--frames 64] [--repeats 3]

The Dia program's decode stage (bench-size random weights, N requests of benchmarks/bench_dia.py's two texts
in one batch, one torch thread, prefill excluded) without CFG (`plain`), with CFG and no sharing
(`off`), and with CFG and this checkout's sharing (`on`); the three configurations interleaved step by
step as benchmarks/bench_cfg.py does. Every step's THREAD CPU time is split by wrapping the program's own
functions, the ones the family names (`Family.profile_ops`, models/dia/profile_ops.py; exclusive time: a
wrapped call inside another counts for the inner one only):

    embed       the decoder's channel embedding          self-attn   DecoderLayer.self_attend (all layers)
    cross-attn  DecoderLayer.cross_attend (all layers)   mlp         DecoderLayer._finish (norm + MLP)
    logits      DiaWeights.logits (the logits GEMM)      combine     sampling.cfg_combine (CFG combine)
    sampling    sampling.process less combine, draw      setup       _paged, cross K/V gather/plans
    python      the rest of decode(): token gathering, final norm, indexing, the delay tracker

Each category's per-step time is its minimum over the repeats (a loaded machine only adds time); the
table prints microseconds per step and, per CFG configuration, the extra over `plain`.
"""

from __future__ import annotations

import argparse
import functools
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
from benchmarks.bench_cfg import make_rows  # noqa: E402
from benchmarks.bench_dia import checkpoint  # noqa: E402

CONFIGS = {"plain": (1.0, True), "off": (3.0, False), "on": (3.0, True)}  # (cfg_scale, share_uncond)
CATEGORIES = ("embed", "self-attn", "cross-attn", "mlp", "logits", "combine", "sampling", "setup", "python")


class Clock:
    """Exclusive thread-CPU time per category of the wrapped calls."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self.stack: list[list] = []  # [category, start, time of wrapped children]

    def wrap(self, fn, category: str):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            self.stack.append([category, time.thread_time(), 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                cat, t0, inner = self.stack.pop()
                dt = time.thread_time() - t0
                self.spent[cat] = self.spent.get(cat, 0.0) + dt - inner
                if self.stack:
                    self.stack[-1][2] += dt
        return timed


def instrument(clock: Clock) -> None:
    """Wrap every function Dia names as a step's op (`Family.profile_ops`, models/dia/profile_ops.py)."""
    from voxcli.models.registry import find_family

    family = find_family("dia")
    if family is None or family.profile_ops is None:
        raise SystemExit("the Dia family names no ops to profile")
    for owner, name, cat in family.profile_ops():
        if hasattr(owner, name):
            setattr(owner, name, clock.wrap(getattr(owner, name), cat))


def profile(n: int, frames: int, repeats: int) -> dict[str, dict[str, float]]:
    """Per configuration, microseconds per decode step per category (minimum over repeats)."""
    from voxcli.models import load_model

    ckpt = str(checkpoint("bench"))
    programs = {k: load_model(ckpt) for k in CONFIGS}
    clock = Clock()
    instrument(clock)
    best: dict[str, dict[str, float]] = {}
    for _ in range(repeats):
        rows = {key: make_rows(programs[key], n, frames, *CONFIGS[key]) for key in CONFIGS}
        spent = {key: dict.fromkeys(CATEGORIES, 0.0) for key in CONFIGS}
        steps = 0
        done = False
        while not done:
            for key in CONFIGS:
                clock.spent = {}
                t0 = time.thread_time()
                outs = programs[key].decode(rows[key])
                total = time.thread_time() - t0
                for cat, dt in clock.spent.items():
                    spent[key][cat] += dt
                spent[key]["python"] += total - sum(clock.spent.values())
                done = all(o.done for o in outs)
            steps += 1
        for key in CONFIGS:
            per = {cat: spent[key][cat] / steps * 1e6 for cat in CATEGORIES}
            old = best.get(key)
            best[key] = per if old is None else {c: min(per[c], old[c]) for c in CATEGORIES}
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", default="16,64")
    ap.add_argument("--frames", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    print(f"CPU, Dia bench size, {args.frames} frames, 1 thread; thread-CPU us per decode step by op "
          f"(minimum over {args.repeats} repeats); extra = CFG configuration - plain")
    for n in (int(x) for x in args.requests.split(",")):
        best = profile(n, args.frames, args.repeats)
        print(f"n={n}")
        print("  " + f"{'op':11s}" + "".join(f"{k:>10s}" for k in CONFIGS)
              + "".join(f"{'extra ' + k:>12s}" for k in CONFIGS if k != "plain"))
        for cat in (*CATEGORIES, "total"):
            vals = {k: (sum(v.values()) if cat == "total" else v[cat]) for k, v in best.items()}
            print("  " + f"{cat:11s}" + "".join(f"{vals[k]:10.0f}" for k in CONFIGS)
                  + "".join(f"{vals[k] - vals['plain']:12.0f}" for k in CONFIGS if k != "plain"))


if __name__ == "__main__":
    main()
