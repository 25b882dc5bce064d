"""gpu_check's runner: the command line (`main`) and `run_steps`, which runs the steps in order under the
deadline and a per-step watchdog, stops at a sticky CUDA error and sets the exit code."""

from __future__ import annotations

import argparse
import faulthandler
import time
import traceback
from pathlib import Path
from typing import Any

import benchmarks.gpu as package
from benchmarks.gpu.bench import bench_child, s_bench
from benchmarks.gpu.calibrate import s_calibrate
from benchmarks.gpu.cuda_util import cuda_healthy
from benchmarks.gpu.device_steps import s_env, s_flashinfer, s_graphs, s_partitions, s_sm_census
from benchmarks.gpu.engine_steps import s_engine_graphs, s_priority
from benchmarks.gpu.results import RESULTS, STATE, STICKY, flush, record, summary
from benchmarks.gpu.steps import Step, plan_steps, print_plan


def main() -> int:
    ap = argparse.ArgumentParser(description=(package.__doc__ or "").split("\n\n")[0])
    ap.add_argument("--out", help="output folder (gc.jsonl, summary.txt, logs, measured profile)")
    ap.add_argument("--quick", action="store_true", help="the <= 4 min subset (see --plan --quick)")
    ap.add_argument("--plan", action="store_true", help="print the steps and their budgets, run nothing")
    ap.add_argument("--lm-sms", type=int, default=96)
    ap.add_argument("--codec-sms", type=int, default=32)
    ap.add_argument("--budget-s", type=float, default=None, help="deadline (default: the plan's total)")
    ap.add_argument("--bench-child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.plan:
        print_plan(args.quick)
        return 0
    if args.bench_child:
        return bench_child(args)
    if not args.out:
        ap.error("--out is required (unless --plan)")
    out = Path(args.out)
    if out.suffix == ".jsonl":  # accept `--out $OUT/gc.jsonl`
        out = out.parent
    out.mkdir(parents=True, exist_ok=True)
    steps = plan_steps(args.quick)
    budget = args.budget_s or sum(s.budget_s for s in steps)
    deadline = time.perf_counter() + budget
    import torch

    if not torch.cuda.is_available():
        record(out, "env", False, error="torch sees no CUDA device; run this on a GPU machine")
        return 2
    runners = {"env": s_env, "partitions": s_partitions, "sm_census": s_sm_census, "graphs": s_graphs,
               "flashinfer": s_flashinfer, "engine_graphs": s_engine_graphs, "priority": s_priority,
               "calibrate": lambda a: s_calibrate(a, out), "bench": lambda a: s_bench(a, out, deadline)}
    return run_steps(steps, runners, args, out, deadline)


def run_steps(steps: list[Step], runners: dict[str, Any], args: Any, out: Path, deadline: float,
              healthy: Any = cuda_healthy, needs_streams: bool = True) -> int:
    """Run `steps` in order under the deadline and a per-step watchdog; the exit code (see the module
    docstring). `runners[name](args) -> (ok, data)`; `healthy()` -> None or the sticky error."""
    watchdog = open(out / "watchdog.txt", "w")  # noqa: SIM115 - lives as long as the process
    flush(out)  # an empty gc.jsonl / summary.txt from the start: a kill at any point leaves both
    for s in steps:
        left = deadline - time.perf_counter()
        if left < s.budget_s:
            record(out, s.name, None, reason=f"skipped: {left:.0f} s left, budget {s.budget_s:.0f} s")
            continue
        if needs_streams and s.name not in ("env", "partitions") and "streams" not in STATE:
            record(out, s.name, None, reason="no lane streams")
            continue
        faulthandler.dump_traceback_later(2 * s.budget_s + 20, exit=True, file=watchdog)
        t0 = time.perf_counter()
        try:
            ok, data = runners[s.name](args)
            record(out, s.name, ok, seconds=round(time.perf_counter() - t0, 1), gates=s.gates, **data)
        except Exception as e:
            record(out, s.name, False, seconds=round(time.perf_counter() - t0, 1), gates=s.gates,
                   error=f"{type(e).__name__}: {e}", trace=traceback.format_exc()[-1500:])
            sick = healthy()
            if sick is not None or any(k in str(e) for k in STICKY):
                record(out, "stopped", False, reason=f"sticky CUDA error after {s.name}: {sick or e}")
                print(summary())
                return 1
        finally:
            faulthandler.cancel_dump_traceback_later()
    print(summary())
    failed = [r["step"] for r in RESULTS if r.get("gates") and r["pass"] is False]
    return 1 if failed else 0
