"""Host time the scheduler spends per LM step on the sim, at a fixed number of running requests.

Keeps N requests running (all arrive at t=0, long enough to outlive the measurement), drives the engine
in virtual time, and times EVERY scheduler call (add, cancel, decide, complete, next_timer) in thread
CPU time (`time.thread_time`, so other processes on a shared machine do not count):
  step      the sum over all calls from one decode completion to the next, that completion's own
            `complete` included: what one LM step costs the host (the number the issue bounds)
  calls     how many scheduler calls one step makes
  decide_* / complete_<stage> / next_timer   each call on its own (decide: launching or not)
Measured from the first decode completion with all N running. Compare two versions of the scheduler
by running the script in each checkout (e.g. `git stash`), in one session, back to back.
Usage: .venv/bin/python scripts/bench_scheduler.py [--running 64 256] [--seconds 6] [--policy full]
"""

from __future__ import annotations

import argparse
import statistics
import time

from voxcli.models.base import SynthesisRequest

from voxcli.config import EngineConfig
from voxcli.engine.engine import Engine
from voxcli.engine.synthetic import SyntheticProgram

CALLS = ("add", "cancel", "decide", "complete", "next_timer")


def measure(running: int, seconds: float, policy: str) -> dict[str, list[float]]:
    # deadline admission: every request is admitted at t=0 (the TTFA gate would refuse the burst's tail)
    cfg = EngineConfig(executor="sim", policy=policy, admission="deadline", max_running=running,
                       kv_pages=running * 160, codec_slots=running, max_queue=running)
    eng = Engine(SyntheticProgram(samples_per_frame=1920), cfg)
    sched = eng.scheduler
    times: dict[str, list[float]] = {k: [] for k in ("step", "calls", *CALLS)}
    # measure from the first decode completion with every request running (deadline admission defers
    # some prefills at first): the steady state at `running` rows the issue bounds
    acc = {"t": 0.0, "n": 0, "armed": False, "on": False}
    clock = time.thread_time

    def wrap(name: str):
        orig = getattr(sched, name)

        def timed(*args, **kw):
            t0 = clock()
            out = orig(*args, **kw)
            dt = clock() - t0
            acc["t"] += dt
            acc["n"] += 1
            if acc["on"]:
                key = name
                if name == "complete":
                    key = "complete_" + args[0].work.stage
                elif name == "decide":
                    key = "decide_launching" if out else "decide_idle"
                times.setdefault(key, []).append(dt)
            if name == "complete" and args[0].work.stage == "decode":
                if acc["on"]:
                    times["step"].append(acc["t"])
                    times["calls"].append(acc["n"])
                acc["on"] = acc["on"] or len(sched.decoding) == running
                acc["t"], acc["n"] = 0.0, 0
            return out

        setattr(sched, name, timed)

    for name in CALLS:
        wrap(name)
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
    print(f"policy={args.policy}; host thread-CPU microseconds (median / p99 / count); "
          "step = every scheduler call between two decode completions")
    for n in args.running:
        t = measure(n, args.seconds, args.policy)
        calls = statistics.median(t.pop("calls")) if t["step"] else 0
        cells = [f"{k} {statistics.median(v) * 1e6:7.1f} / {pct(v, 0.99) * 1e6:7.1f} / {len(v)}"
                 for k, v in t.items() if v]
        print(f"running={n:4d}  calls/step {calls:g}  " + "   ".join(cells))


if __name__ == "__main__":
    main()
