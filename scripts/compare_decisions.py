"""Do two versions of the scheduler decide alike? A digest of every decision on randomized sim workloads.

A change to the scheduler's hot path must leave its decisions bit-identical. tests/test_scheduler_hot_path.py
checks the logged decode path against the row-by-row one inside one checkout; this script checks a whole
checkout against a git revision (default main): each version runs, in a fresh process, the same workloads
(Poisson arrivals, mixed lengths, cancels, injected prefill / decode / codec failures, some CFG pairs) under
several policies and settings, and hashes every batch decided (time, lane, stage, bucket, rows or chunks
with their pages and slots), every request's timeline and its audio, and the late-chunk counters. Equal
digests on every case: the versions decide alike. The revision's voxcli/ and models/ are exported as
bench_scheduler.py does, and the worker checks that it imported the version it was asked for.
Usage: .venv/bin/python scripts/compare_decisions.py [--against main] [--seeds 11 12] [--requests 200]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_scheduler import REPO, export_rev
from voxcli.models.base import SynthesisRequest

from voxcli.config import ChunkSchedule, EngineConfig

# (name, policy, admission, other EngineConfig settings, decode steps without a frame (delay pattern))
CASES: list[tuple[str, str, str, dict, int]] = [
    ("full gate", "full", "ttfa-gate", {}, 0),
    ("full deadline, capped steps", "full", "deadline",
     {"max_running": 40, "decode_buckets": (1, 2, 4, 8, 16, 32)}, 0),
    ("full gate, delay pattern", "full", "ttfa-gate", {}, 3),
    ("full deadline, no late path, adaptive", "full", "deadline",
     {"late_urgent": False, "deadline_launch": False, "adaptive_batching": True}, 0),
    ("full deadline, no slack cap", "full", "deadline", {"slack_cap": False}, 0),
    ("lanes, ramped chunks", "lanes", "deadline",
     {"chunk": ChunkSchedule(first=2, ramp=(4, 6), steady=8)}, 0),
    ("sync2", "sync2", "deadline", {}, 0),
    ("sync", "sync", "deadline", {}, 0),
]


def workload(n: int, seed: int) -> list[tuple[float, SynthesisRequest, float | None]]:
    rng = random.Random(seed)
    t, out = 0.0, []
    for i in range(n):
        t += rng.expovariate(80.0)
        frames = rng.choice([0, rng.randint(1, 6), rng.randint(7, 60), rng.randint(60, 300)])
        text, u = "some words to speak", rng.random()
        if u < 0.013:
            text += " [fail:prefill]"
        elif u < 0.027:
            text += f" [fail:decode@{rng.randint(0, max(0, frames - 1))}]"
        elif u < 0.04:
            text += f" [fail:codec@{rng.randint(0, 3)}]"
        cancel = t + rng.uniform(0.0, 3.0) if rng.random() < 0.05 else None
        cfg_scale = 2.0 if i % 7 == 3 else None  # some CFG pairs (width 2)
        out.append((t, SynthesisRequest(text=text, fixed_frames=frames, cfg_scale=cfg_scale), cancel))
    return out


def record_batches(eng: Any, sink: Callable[[tuple], None]) -> None:
    """Hand `sink` every batch the engine launches, as it is decided: (time, lane, stage, bucket, rows),
    rows being (request, chunk index, start, end, last) for a codec batch and (request, pages, slot) for
    an LM batch."""
    launch = eng.executor.launch

    def record(work: Any) -> Any:
        if work.stage == "codec":
            rows = [(ch.request.id, ch.index, ch.start, ch.end, ch.last) for ch in work.tag]
        else:
            rows = [(row.request_id, tuple(row.pages), row.slot) for row in work.rows]
        sink((work.decided_at, work.lane, work.stage, work.bucket, rows))
        return launch(work)

    eng.executor.launch = record


def digest(case: tuple[str, str, str, dict, int], seed: int, n: int) -> str:
    import dataclasses

    from voxcli.models import registry

    from voxcli.engine.engine import Engine
    from voxcli.engine.synthetic import SyntheticProgram

    _, policy, admission, extra, lead = case
    try:
        cfg = EngineConfig(executor="sim", policy=policy, admission=admission, **extra)
    except TypeError as e:  # a setting this version does not have
        return f"n/a ({e})"
    sim = dataclasses.replace(registry.default_family().sim, lead_steps=lead)
    eng = Engine(SyntheticProgram(sample_rate=100, samples_per_frame=8, pcm_scale=1.0, sim=sim), cfg)
    h = hashlib.sha256()
    record_batches(eng, lambda batch: h.update(repr(batch).encode()))
    streams = []
    for t, req, cancel in workload(n, seed):
        s = eng.submit(req, at=t)
        if cancel is not None:
            eng.cancel(s.request_id, at=cancel)
        streams.append(s)
    eng.run()
    for s in streams:
        audio = hashlib.sha256(s.wait().tobytes()).hexdigest() if s.status == "done" else None
        tl = s.timeline
        h.update(repr((s.status, s.reason, audio, tl.admitted, tl.first_frame, tl.first_audio, tl.finished,
                       tl.frames, [(c.index, c.frames, c.t_ready, c.t_dispatched, c.t_delivered, c.lane)
                                   for c in tl.chunks])).encode())
    counts = eng.scheduler.counts  # (the counters every version has: later ones add more)
    h.update(repr([counts.get(k) for k in ("promoted", "deadline_launches")]).encode())
    return h.hexdigest()[:20]


def run_version(pythonpath: str | None, seeds: list[int], n: int) -> dict[str, str]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    args = [sys.executable, __file__, "--worker", "--requests", str(n), "--seeds", *map(str, seeds)]
    out = subprocess.run(args, check=True, capture_output=True, text=True, env=env).stdout
    got = json.loads(out.splitlines()[-1])
    want = Path(pythonpath or REPO).resolve() / "voxcli"
    if Path(got.pop("voxcli")).resolve() != want:  # the revision must really be the one run
        raise RuntimeError(f"the worker imported voxcli from another place than {want}")
    return got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--against", default="main", help="git revision to compare this checkout with")
    ap.add_argument("--seeds", type=int, nargs="+", default=[11, 12])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # digests of one version
    args = ap.parse_args()
    if args.worker:
        import voxcli

        out = {f"{case[0]} / seed {seed}": digest(case, seed, args.requests) for case in CASES
               for seed in args.seeds}
        print(json.dumps({**out, "voxcli": os.path.dirname(voxcli.__file__)}))
        return
    with tempfile.TemporaryDirectory() as tmp:
        export_rev(args.against, Path(tmp))
        theirs = run_version(tmp, args.seeds, args.requests)
    ours = run_version(None, args.seeds, args.requests)
    na = [k for k in ours if ours[k].startswith("n/a") or theirs.get(k, "n/a").startswith("n/a")]
    differ = [k for k in ours if k not in na and ours[k] != theirs[k]]
    for k in ours:
        print(f"{'n/a    ' if k in na else 'DIFFER ' if k in differ else 'same   '} {k}")
    print(f"{len(ours) - len(differ) - len(na)} of {len(ours) - len(na)} cases decide alike in this checkout "
          f"and {args.against}" + (f" ({len(na)} not comparable: a setting one version lacks)" if na else ""))
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
