"""Engine invariants at scale: 10,000 randomized requests on the sim executor, in segments that each end
with `close()` in the middle of the run (requests queued, prefilling, decoding and draining), with
random cancels and injected per-row (decode, codec) and per-batch (prefill) stage errors, across every
policy and both admissions, some segments on small pools. One SyntheticProgram serves every segment.

Checked, from outside the scheduler: the observer's launch/ordering rules on every batch (0 violations);
every stream ends exactly once and gets no audio after its end; the audio of every stream is frames
0..k in order (complete for `done`); after each close the KV pages and codec slots are all free, the
program holds no per-row state (every prefilled row was released), and a NEW engine on the same
program produces exact audio."""

from __future__ import annotations

import random

import numpy as np
from support.engine_observer import Observer
from support.engine_workload import SPF, submit_observed, workload
from voxcli.models.base import SynthesisRequest

from voxcli.config import EngineConfig
from voxcli.engine.engine import Engine
from voxcli.engine.estimates import LatencyEstimator, default_profile
from voxcli.engine.lanes import lane_layout
from voxcli.engine.stream import AudioStream
from voxcli.sim.executor import SimExecutor
from voxcli.sim.synthetic import SyntheticProgram

TOTAL = 10_000
SEGMENTS = 8
AMPLE = dict(executor="sim", kv_pages=65536, codec_slots=4096, max_running=4096, max_queue=4096)
SMALL = dict(executor="sim", kv_pages=96, kv_page_size=16, codec_slots=12, max_running=12, max_queue=64)
PLANS = [("full", "deadline", AMPLE), ("full", "prefill-first", SMALL), ("lanes", "deadline", AMPLE),
         ("sync2", "deadline", AMPLE), ("sync", "prefill-first", AMPLE), ("full", "deadline", SMALL),
         ("lanes", "prefill-first", SMALL), ("full", "deadline", AMPLE)]


class TrackingProgram(SyntheticProgram):
    """Records which rows hold per-row state: set at prefill, returned by `release`."""

    def __init__(self) -> None:
        super().__init__(sample_rate=100, samples_per_frame=SPF, pcm_scale=1.0)
        self.live: dict[int, int] = {}  # request id -> slot

    def prefill(self, rows):
        out = super().prefill(rows)
        for row in rows:
            self.live[row.request_id] = row.slot
        return out

    def release(self, row) -> None:
        self.live.pop(row.request_id, None)
        row.state = None


class StreamLog:
    """Wraps AudioStream's engine-side calls: ends per stream, and any audio pushed after the end."""

    def __init__(self, monkeypatch) -> None:
        self.ends: dict[AudioStream, list[str]] = {}  # keeps the streams alive: no id reuse
        self.late: list[int] = []
        deliver, end = AudioStream.deliver, AudioStream.end
        log = self

        def logged_deliver(stream, chunk):
            if stream.finished:
                log.late.append(stream.request_id)
            deliver(stream, chunk)

        def logged_end(stream, status, *rest):
            if not stream.finished:
                log.ends.setdefault(stream, []).append(status)
            end(stream, status, *rest)

        monkeypatch.setattr(AudioStream, "deliver", logged_deliver)
        monkeypatch.setattr(AudioStream, "end", logged_end)


def _engine(program: TrackingProgram, cfg: EngineConfig, check_deferral: bool) -> tuple[Engine, Observer]:
    if cfg.chunk is None:  # the model's own schedule: the observer checks the one the engine runs
        cfg = cfg.replace(chunk=program.spec.chunk)
    profile = default_profile()
    layout = lane_layout(cfg)
    obs = Observer(SimExecutor(program, profile, layout), cfg, LatencyEstimator(profile, cfg, layout),
                   program.spec.frame_seconds, check_deferral)
    return Engine(program, cfg, executor=obs, profile=profile), obs


def _probe(program: TrackingProgram) -> None:
    """A new engine on the program that just served a closed one: exact audio, nothing left behind."""
    eng, _ = _engine(program, EngineConfig(policy="full", **AMPLE), True)
    streams = [eng.submit(SynthesisRequest(text="probe", fixed_frames=n), at=0.0) for n in (1, 9, 23)]
    eng.run()
    for n, s in zip((1, 9, 23), streams, strict=True):
        assert s.status == "done", (s.status, s.reason)
        assert np.array_equal(s.wait(), np.repeat(np.arange(n, dtype=np.float32), SPF))
    eng.close()
    assert not program.live


def test_ten_thousand_requests_with_closes_mid_run(monkeypatch):
    rng = random.Random(12)
    log = StreamLog(monkeypatch)
    program = TrackingProgram()
    per = TOTAL // SEGMENTS
    statuses: dict[str, int] = {}
    submitted = 0
    for seg, (policy, admission, pools) in enumerate(PLANS[:SEGMENTS]):
        cfg = EngineConfig(policy=policy, admission=admission, **pools)
        eng, obs = _engine(program, cfg, check_deferral=pools is AMPLE)
        reqs = workload(per, rate=40.0, seed=100 + seg, cancel_frac=0.08, fail_frac=0.08)
        streams = submit_observed(eng, obs, reqs)
        last = reqs[-1][0]
        # close mid-run (the last segment runs to the end first, then closes an idle engine)
        close_at = last * rng.uniform(0.35, 0.9) if seg < SEGMENTS - 1 else None
        eng.run(until=close_at)
        open_before = sum(not s.finished for s in streams)
        eng.close()
        submitted += len(streams)

        if close_at is not None:
            assert open_before > 0, "the close did not land mid-run"
        sched = eng.scheduler
        assert sched.kv.free == cfg.kv_pages, f"segment {seg}: KV pages held after close"
        assert sched.slots.free == cfg.codec_slots, f"segment {seg}: codec slots held after close"
        assert not program.live, f"segment {seg}: rows {sorted(program.live)} never released"
        for s, (_, req, _) in zip(streams, reqs, strict=True):
            assert s.finished, f"request {s.request_id} never ended"
            assert len(log.ends[s]) == 1
            statuses[s.status] = statuses.get(s.status, 0) + 1
            got = s.wait() if s.status == "done" else _delivered(s)
            k = got.size // SPF
            assert np.array_equal(got, np.repeat(np.arange(k, dtype=np.float32), SPF)), \
                f"request {s.request_id}: audio out of order"
            if s.status == "done":
                assert k == req.fixed_frames
        _probe(program)
    assert submitted == TOTAL
    assert not log.late, f"audio pushed after the end of requests {log.late[:10]}"
    # every outcome happened, at scale
    assert statuses.get("done", 0) > 4000 and statuses.get("failed", 0) > 200, statuses
    assert statuses.get("cancelled", 0) > 500, statuses


def _delivered(stream: AudioStream) -> np.ndarray:
    chunks = stream._chunks
    if not chunks:
        return np.zeros(0, np.float32)
    return np.concatenate([c.pcm for c in chunks]).astype(np.float32)
