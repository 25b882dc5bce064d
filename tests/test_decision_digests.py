"""The scheduler decides exactly as it did: a digest of every decision on randomized sim workloads, compared
with golden digests recorded at main 1db9b85 (before the scheduler was split into mechanism and policies).

Each case (a policy, an admission policy and settings) runs the same workload per seed: Poisson arrivals at
80 req/s, mixed lengths (0, 1-6, 7-60, 60-300 frames), cancels, injected prefill / decode / codec failures
and CFG pairs (width 2), on the synthetic program in virtual time. The digest hashes every batch decided
(time, lane, stage, bucket, rows or chunks with their pages and slots), every request's timeline and audio,
and the late-chunk counters. A change that moves one decision by one row or one microsecond changes it.

The golden file is tests/fixtures/decision_digests.json. Regenerate it ONLY from a revision whose decisions
are the reference (a deliberate change of policy, said so in its commit):

    .venv/bin/python tests/test_decision_digests.py --write

(this replaced scripts/compare_decisions.py, which compared a checkout with a git revision in two
processes; the golden file is that comparison with the reference revision run once.)
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import random
from pathlib import Path
from typing import Any

import pytest
from support.batch_recorder import record_batches
from voxcli.models.base import SynthesisRequest

from voxcli.config import ChunkSchedule, EngineConfig

GOLDEN = Path(__file__).resolve().parent / "fixtures" / "decision_digests.json"
SEEDS = (11, 12, 13)
REQUESTS = 300

# (name, policy, admission, other EngineConfig settings, decode steps without a frame (delay pattern))
CASES: list[tuple[str, str, str, dict[str, Any], int]] = [
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
    """(arrival time, request, cancel time or None) for `n` requests drawn from `seed`."""
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


def digest(case: tuple[str, str, str, dict[str, Any], int], seed: int, n: int) -> str:
    """The digest of one case on one seed's workload of `n` requests."""
    from voxcli.models import registry

    from voxcli.engine.engine import Engine
    from voxcli.sim.synthetic import SyntheticProgram

    _, policy, admission, extra, lead = case
    cfg = EngineConfig(executor="sim", policy=policy, admission=admission, **extra)
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
    counts = eng.scheduler.counts
    h.update(repr([counts.get(k) for k in ("promoted", "deadline_launches")]).encode())
    return h.hexdigest()[:20]


def key(case: tuple[str, str, str, dict[str, Any], int], seed: int) -> str:
    return f"{case[0]} / seed {seed}"


def all_digests() -> dict[str, str]:
    return {key(case, seed): digest(case, seed, REQUESTS) for case in CASES for seed in SEEDS}


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_decisions_match_the_golden_digests(case: tuple[str, str, str, dict[str, Any], int]) -> None:
    golden = json.loads(GOLDEN.read_text())
    assert golden["requests"] == REQUESTS and golden["seeds"] == list(SEEDS)
    for seed in SEEDS:
        assert digest(case, seed, REQUESTS) == golden["digests"][key(case, seed)], (
            f"{key(case, seed)}: the scheduler decides differently from the golden revision "
            f"({golden['revision']})")


def test_the_golden_file_covers_every_case() -> None:
    golden = json.loads(GOLDEN.read_text())["digests"]
    assert set(golden) == {key(c, s) for c in CASES for s in SEEDS}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help="write the golden file from this checkout")
    ap.add_argument("--revision", default="", help="with --write: the revision the digests come from")
    args = ap.parse_args()
    got = all_digests()
    if args.write:
        GOLDEN.write_text(json.dumps({"revision": args.revision, "requests": REQUESTS, "seeds": list(SEEDS),
                                      "digests": got}, indent=1) + "\n")
        print(f"wrote {GOLDEN}")
    else:
        print(json.dumps(got, indent=1))


if __name__ == "__main__":
    main()
