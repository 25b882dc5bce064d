"""Host time per scheduler decision on the sim, at a fixed number of running requests.

Keeps N requests running (all arrive at t=0, long enough to outlive the measurement), drives the engine
in virtual time, and times every scheduler call with perf_counter:
  decide    choosing the next batch for the free lanes (the decision proper)
  complete  folding a finished batch back in (per-row frame bookkeeping, chunk readiness)
  step      decide + complete per LM step (what one engine iteration costs the host)
Usage: .venv/bin/python scripts/bench_scheduler.py [--running 64 256] [--seconds 8] [--policy full]
"""

from __future__ import annotations

import argparse
import statistics
import time

from voxcli.models.base import SynthesisRequest

from voxcli.config import EngineConfig
from voxcli.engine.engine import Engine
from voxcli.engine.synthetic import SyntheticProgram


def measure(running: int, seconds: float, policy: str) -> dict[str, list[float]]:
    cfg = EngineConfig(executor="sim", policy=policy, max_running=running, kv_pages=running * 160,
                       codec_slots=running, max_queue=running)
    eng = Engine(SyntheticProgram(samples_per_frame=1920), cfg)
    sched = eng.scheduler
    times: dict[str, list[float]] = {"decide": [], "complete": [], "step": []}
    warm = 1.0  # seconds of virtual time before measuring (all requests admitted by then)
    orig_decide, orig_complete = sched.decide, sched.complete
    last_decide = [0.0]

    def decide(now, free=None):
        t0 = time.perf_counter()
        out = orig_decide(now, free)
        dt = time.perf_counter() - t0
        if now >= warm:
            times["decide"].append(dt)
            last_decide[0] = dt
        return out

    def complete(c):
        t0 = time.perf_counter()
        out = orig_complete(c)
        dt = time.perf_counter() - t0
        if c.finished >= warm:
            times["complete"].append(dt)
            if c.work.stage == "decode":
                times["step"].append(dt + last_decide[0])
        return out

    sched.decide, sched.complete = decide, complete  # type: ignore[method-assign]
    for i in range(running):
        eng.submit(SynthesisRequest(text=f"request {i}", fixed_frames=2000), at=0.0)
    eng.run(until=seconds)
    assert len(sched.decoding) == running, f"only {len(sched.decoding)} of {running} running"
    return times


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--running", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--policy", default="full")
    args = ap.parse_args()
    print(f"policy={args.policy}; host microseconds per call (median / p99 / count)")
    for n in args.running:
        t = measure(n, args.seconds, args.policy)
        cells = [f"{k} {statistics.median(v) * 1e6:7.1f} / {pct(v, 0.99) * 1e6:7.1f} / {len(v)}"
                 for k, v in t.items()]
        print(f"running={n:4d}  " + "   ".join(cells))


if __name__ == "__main__":
    main()
