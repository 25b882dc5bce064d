"""gpu_check's steps: name, time budget, --quick or not, check (gates) or measurement; the printed plan."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    name: str
    budget_s: float  # skipped when less than this is left before the deadline; the watchdog allows 2x + 20 s
    quick: bool  # part of --quick
    gates: bool  # a FAIL makes the exit code 1 (checks); measurements never gate
    what: str


STEPS: tuple[Step, ...] = (
    Step("env", 5, True, True, "versions, SMs, stream priority range"),
    Step("partitions", 10, True, True, "device SM granularity, split probes, green-context lane streams"),
    Step("sm_census", 15, False, False, "SMs each lane stream's kernels land on (Triton %smid)"),
    Step("graphs", 15, True, True, "graphs on each lane stream, concurrent replays, cross-stream replay"),
    Step("flashinfer", 20, True, True, "FlashInfer, head_dim 128: prime, capture, re-plan, replay vs torch"),
    Step("engine_graphs", 60, True, True, "random 1.7B on the device; CudaExecutor decode + codec graphs at "
         "3 buckets, a real batch through them, replay ms"),
    Step("priority", 20, True, False, "urgent graph latency with both background lanes busy; cross-stream"),
    Step("calibrate", 150, False, False, "stage ms at >=3 SM counts, interference, context 64/1024 -> "
         "recipes/gpus/<gpu>.measured.toml"),
    Step("bench", 100, True, False, "engine bench, policy full vs sync2, two rates (subprocess per policy)"),
)
QUICK = {"decode": (1, 16, 128), "background": (1, 8, 32), "urgent": (1, 4, 8)}
BENCH_QUICK = dict(rates=(2.0, 6.0), seconds=6, warmup=4)
BENCH_FULL = dict(rates=(2.0, 6.0), seconds=20, warmup=8)


def plan_steps(quick: bool) -> list[Step]:
    steps = [s for s in STEPS if s.quick or not quick]
    if not quick:
        steps = [Step(s.name, 200, s.quick, s.gates, s.what) if s.name == "bench" else s for s in steps]
    return steps


def print_plan(quick: bool) -> None:
    steps = plan_steps(quick)
    mode = "quick" if quick else "full"
    print(f"gpu_check plan ({mode}): {len(steps)} steps; a step is skipped when its budget no longer fits")
    for i, s in enumerate(steps):
        kind = "check" if s.gates else "measure"
        print(f"  {i:02d} {s.name:<14} {kind:<8} {s.what}  {s.budget_s:.0f} s")
    print(f"total {sum(s.budget_s for s in steps):.0f} s")
