"""Randomized workloads and a sim harness shared by the engine/sim/scheduler tests."""

from __future__ import annotations

import random

import numpy as np
from voxcli.models.base import SynthesisRequest

from support.engine_observer import Observer
from voxcli.config import EngineConfig
from voxcli.engine.engine import Engine
from voxcli.engine.estimates import LatencyEstimator, default_profile
from voxcli.engine.lanes import lane_layout
from voxcli.sim.executor import SimExecutor
from voxcli.sim.synthetic import SyntheticProgram

SPF = 8  # tiny PCM per frame: the audio still tells which frames arrived, in which order


def workload(n: int, rate: float, seed: int, cancel_frac: float = 0.05, fail_frac: float = 0.04,
             max_frames: int = 160) -> list[tuple[float, SynthesisRequest, float | None]]:
    """Poisson arrivals; mixed lengths (empty, shorter than a first chunk, short, long); some cancels at
    random times; some injected prefill / decode / codec failures."""
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate)
        frames = rng.choice([0, rng.randint(1, 6), rng.randint(7, 60), rng.randint(60, max_frames)])
        text = "some words to speak"
        u = rng.random()
        if u < fail_frac / 3:
            text += " [fail:prefill]"
        elif u < 2 * fail_frac / 3:
            text += f" [fail:decode@{rng.randint(0, max(0, frames - 1))}]"
        elif u < fail_frac:
            text += f" [fail:codec@{rng.randint(0, 3)}]"
        cancel = t + rng.uniform(0.0, 3.0) if rng.random() < cancel_frac else None
        out.append((t, SynthesisRequest(text=text, fixed_frames=frames), cancel))
    return out


def run_sim(config: EngineConfig, reqs, check_deferral: bool = True):
    program = SyntheticProgram(sample_rate=100, samples_per_frame=SPF, pcm_scale=1.0)  # 80 ms frames
    config = config.replace(chunk=config.chunk_or(program.spec.chunk))  # the schedule the engine runs
    layout = lane_layout(config)
    profile = default_profile()
    inner = SimExecutor(program, profile, layout)
    obs = Observer(inner, config, LatencyEstimator(profile, config, layout), program.spec.frame_seconds,
                   check_deferral)
    eng = Engine(program, config, executor=obs, profile=profile)
    streams = submit_observed(eng, obs, reqs)
    eng.run()
    return eng, obs, streams


def submit_observed(eng: Engine, obs: Observer, reqs) -> list:
    """Schedule each (arrival time, request, cancel time or None) on the engine's virtual clock and tell
    the observer; returns the streams in order."""
    streams = []
    for t, req, cancel in reqs:
        s = eng.submit(req, at=t)
        obs.note_arrival(s.request_id, t)
        obs.streams[s.request_id] = s
        if cancel is not None:
            eng.cancel(s.request_id, at=cancel)
            obs.note_cancel(s.request_id, cancel)
        streams.append(s)
    return streams


def check_outcomes(eng: Engine, obs: Observer, streams, reqs) -> dict[str, int]:
    """End-of-run invariants: every stream ended; done streams carry exactly their frames, in order;
    failures carry their reason; every KV page and codec slot is back in its pool."""
    statuses: dict[str, int] = {}
    for s, (_, req, cancel) in zip(streams, reqs, strict=True):
        assert s.finished, f"request {s.request_id} never finished ({s.status})"
        statuses[s.status] = statuses.get(s.status, 0) + 1
        tl = s.timeline
        if s.status == "done":
            audio = s.wait()
            expect = np.repeat(np.arange(req.fixed_frames, dtype=np.float32), SPF)
            assert np.array_equal(audio, expect), f"request {s.request_id}: audio is not frames 0..n in order"
            assert tl.frames == req.fixed_frames
            chunk_frames = [c.frames for c in tl.chunks]
            assert sum(chunk_frames) == req.fixed_frames
            assert [c.index for c in tl.chunks] == list(range(len(tl.chunks)))
            for c in tl.chunks[:-1]:
                assert c.frames == eng.config.chunk.size(c.index)
            q = obs.reqs[s.request_id]
            assert q.sent == len(q.frames) == req.fixed_frames and (q.last_sent or req.fixed_frames == 0)
            assert tl.first_audio is not None or req.fixed_frames == 0
            assert tl.admitted is not None and tl.arrival <= tl.admitted <= tl.finished
        elif s.status == "failed":
            assert s.reason and "stage failed" in s.reason, s.reason
            # fault isolation: only a request whose own data failed a stage fails, never a batch-mate
            assert "[fail:" in req.text, s.reason
        elif s.status == "cancelled":
            assert cancel is not None and tl.finished >= cancel - 1e-9
        else:
            raise AssertionError(f"unexpected status {s.status}: {s.reason}")
    sched = eng.scheduler
    assert sched.idle and not sched.waiting and not sched.decoding and not sched.pending
    assert sched.kv.free == eng.config.kv_pages, "KV pages leaked"
    assert sched.slots.free == eng.config.codec_slots, "codec slots leaked"
    return statuses
