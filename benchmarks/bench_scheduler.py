"""Host time the scheduler spends per LM step on the sim, at a fixed number of running requests.

Keeps N requests running (all arrive at t=0, long enough to outlive the measurement), drives the engine
in virtual time, and times EVERY scheduler call (add, cancel, decide, complete, next_timer) in thread
CPU time (`time.thread_time`, so other processes on a shared machine do not count):
  step      the sum over all calls from one decode completion to the next, that completion's own
            `complete` included: what one LM step costs the host (the number the issue bounds)
  calls     how many scheduler calls one step makes
  decide_* / complete_<stage> / next_timer   each call on its own (decide: launching or not)
Measured from the first decode completion with all N running.

`--compare REV` measures the scheduler of git revision REV (its voxcli/ and models/, exported to a temp
dir) beside this checkout's, in one run on the same load: `--rounds` fresh processes of each, taken in
turns (A B, B A, ...) so machine load drifting during the run falls on both alike; the step times of all
rounds are pooled per version and printed side by side, median and p99, with the ratio this / REV.
Usage: .venv/bin/python -m benchmarks bench_scheduler [--running 64 256] [--seconds 6] [--policy full]
       .venv/bin/python -m benchmarks bench_scheduler --compare main [--rounds 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from voxcli.models.base import SynthesisRequest

from voxcli.config import EngineConfig
from voxcli.engine.engine import Engine

try:
    from voxcli.sim.synthetic import SyntheticProgram
except ModuleNotFoundError:  # --compare's worker on a revision before voxcli/sim/ (e.g. 2fafad2)
    from voxcli.engine.synthetic import SyntheticProgram  # type: ignore[no-redef]

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


REPO = Path(__file__).resolve().parent.parent


def export_rev(rev: str, into: Path) -> None:
    """voxcli/ and models/ of git revision `rev` under `into` (a PYTHONPATH entry shadowing the checkout)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", rev, "voxcli", "models"],
                             check=True, capture_output=True).stdout
    tar_path = into / "rev.tar"
    tar_path.write_bytes(archive)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into, filter="data")


def worker_steps(pythonpath: str | None, running: int, seconds: float, policy: str) -> list[float]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, __file__, "--worker", "--running", str(running), "--seconds",
                          str(seconds), "--policy", policy], check=True, capture_output=True, text=True,
                         env=env).stdout
    got = json.loads(out.splitlines()[-1])
    want = Path(pythonpath or REPO).resolve() / "voxcli"
    if Path(got["voxcli"]).resolve() != want:  # the revision must really be the one measured
        raise RuntimeError(f"the worker imported voxcli from {got['voxcli']}, not {want}")
    return got["step"]


def compare(rev: str, args: argparse.Namespace) -> None:
    print(f"policy={args.policy}; step = host thread-CPU microseconds of every scheduler call between two "
          f"decode completions; {args.rounds} rounds per version, taken in turns, pooled; load average "
          f"{os.getloadavg()[0]:.1f} at the start", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        export_rev(rev, Path(tmp))
        versions = {rev: tmp, "this checkout": None}
        for n in args.running:
            steps: dict[str, list[float]] = {k: [] for k in versions}
            for k in range(args.rounds):
                order = list(versions) if k % 2 == 0 else list(versions)[::-1]
                for name in order:
                    steps[name] += worker_steps(versions[name], n, args.seconds, args.policy)
            cells = {name: (statistics.median(v), pct(v, 0.99), statistics.fmean(v), len(v))
                     for name, v in steps.items()}
            line = "   ".join(f"{name}: median {m * 1e6:6.1f} p99 {p * 1e6:7.1f} mean {a * 1e6:6.1f} "
                               f"({c} steps)" for name, (m, p, a, c) in cells.items())
            (m0, p0, a0, _), (m1, p1, a1, _) = cells[rev], cells["this checkout"]
            print(f"running={n:4d}  {line}   this/{rev}: median {m1 / m0:.2f}x p99 {p1 / p0:.2f}x "
                  f"mean {a1 / a0:.2f}x   (load average {os.getloadavg()[0]:.1f})", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--running", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--policy", default="full")
    ap.add_argument("--compare", metavar="REV", help="also measure git revision REV, side by side")
    ap.add_argument("--rounds", type=int, default=4, help="--compare: processes per version")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # one measurement, as JSON
    args = ap.parse_args()
    if args.worker:
        import voxcli

        steps = measure(args.running[0], args.seconds, args.policy)["step"]
        print(json.dumps({"step": steps, "voxcli": os.path.dirname(voxcli.__file__)}))
        return
    if args.compare:
        compare(args.compare, args)
        return
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
