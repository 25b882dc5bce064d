"""The scheduler's decode hot path (frame log + rows filed by due step) decides exactly as the row-by-row
path: same batches, same timelines, same audio, on randomized sim workloads; and the frame log alone."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest
from support.batch_recorder import record_batches
from support.engine_workload import workload
from voxcli.models import registry
from voxcli.models.base import Prompt, SynthesisRequest

from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.codec_batcher import stack_frames
from voxcli.engine.engine import Engine
from voxcli.engine.frame_log import FrameLog
from voxcli.engine.lm_batcher import LmBatcher
from voxcli.engine.request import Request
from voxcli.sim.synthetic import SyntheticProgram


def _run(cfg: EngineConfig, reqs, logged: bool, monkeypatch, lead_steps: int = 0) -> tuple:
    """Every batch decided (time, lane, stage, rows / chunks), every timeline with its audio's hash."""
    hits = {"logged": 0, "due": 0}
    with monkeypatch.context() as m:
        orig = LmBatcher._decode_logged
        orig_due = LmBatcher._due_frames

        def decode_logged(self, *args):
            out = orig(self, *args) if logged else None
            hits["logged"] += out is not None
            return out

        def due_frames(self, due, *args):  # the due rows of a usual step: chunks pended inline
            hits["due"] += len(due)
            return orig_due(self, due, *args)

        m.setattr(LmBatcher, "_decode_logged", decode_logged)
        m.setattr(LmBatcher, "_due_frames", due_frames)
        sim = dataclasses.replace(registry.default_family().sim, lead_steps=lead_steps)  # steps with no frame
        eng = Engine(SyntheticProgram(sample_rate=100, samples_per_frame=8, pcm_scale=1.0, sim=sim), cfg)
        batches: list = []
        record_batches(eng, batches.append)
        streams = []
        for i, (t, req, cancel) in enumerate(reqs):
            if i % 7 == 3:  # some CFG pairs (width 2)
                req = SynthesisRequest(text=req.text, fixed_frames=req.fixed_frames, cfg_scale=2.0)
            s = eng.submit(req, at=t)
            if cancel is not None:
                eng.cancel(s.request_id, at=cancel)
            streams.append(s)
        eng.run()
        timelines = []
        for s in streams:
            audio = hashlib.sha256(s.wait().tobytes()).hexdigest() if s.status == "done" else None
            tl = s.timeline
            timelines.append((s.status, s.reason, audio, tl.admitted, tl.first_frame, tl.first_audio,
                              tl.finished, tl.frames, [tuple(vars(c).values()) if hasattr(c, "__dict__")
                                                       else (c.index, c.frames, c.t_ready, c.t_dispatched,
                                                             c.t_delivered, c.lane) for c in tl.chunks]))
        sched = eng.scheduler
        assert sched.idle and not sched.pending and sched.kv.free == cfg.kv_pages
        return batches, timelines, dict(sched.counts), hits["logged"], hits["due"]


@pytest.mark.parametrize("policy,admission,extra,lead", [
    ("full", "ttfa-gate", {}, 0),
    ("lanes", "deadline", {"chunk": ChunkSchedule(first=2, ramp=(4, 6), steady=8)}, 0),
    ("full", "deadline", {"max_running": 40, "decode_buckets": (1, 2, 4, 8, 16, 32)}, 0),  # capped steps
    ("full", "ttfa-gate", {}, 3),  # a delay pattern: each request's first steps have no frame
])
def test_logged_hot_path_decides_as_row_by_row(policy, admission, extra, lead, monkeypatch):
    cfg = EngineConfig(executor="sim", policy=policy, admission=admission, **extra)
    reqs = workload(160, rate=60.0, seed=11, max_frames=200)
    fast = _run(cfg, reqs, True, monkeypatch, lead)
    slow = _run(cfg, reqs, False, monkeypatch, lead)
    assert fast[3] > 50 and slow[3] == 0  # the logged path really ran (and really did not)
    assert fast[4] > 50 and slow[4] == 0  # and so did its due rows' inline chunk path
    assert fast[0] == slow[0]
    assert fast[1] == slow[1]
    assert fast[2] == slow[2]


def _request(rid: int) -> Request:
    return Request(rid, Prompt(length=4, data=None, max_frames=100), 0.0, ChunkSchedule(), 0.08, 1.0)


def test_frame_log_settles_each_rows_frames_in_order_across_epochs():
    log = FrameLog()
    a, b, c = _request(1), _request(2), _request(3)
    rows = [a, b]
    log.step(rows, ["a0", "b0"], attach=[a, b])
    log.step(rows, ["a1", "b1"], attach=[])
    assert (a.n_frames, b.n_frames, a.frames) == (2, 2, [])  # counted, not yet settled
    log.settle(a)
    assert a.frames == ["a0", "a1"] and a.n_frames == 2
    rows = [b, c, a]  # the running set changed: a new epoch, new positions
    log.step(rows, ["b2", "c0", "a2"], attach=[c])
    log.detach(b)  # b stops running: all its frames settled, nothing logged for it any more
    assert b.frames == ["b0", "b1", "b2"] and b.log_epoch is None
    rows = [c, a]
    log.step(rows, ["c1", "a3"], attach=[])
    assert b.n_frames == 3 and c.n_frames == 2 and a.n_frames == 4
    log.settle(a)
    log.settle(c)
    assert a.frames == ["a0", "a1", "a2", "a3"] and c.frames == ["c0", "c1"]
    log.step(rows, ["c2", "a4"], attach=[])
    log.flush()
    assert a.frames[-1] == "a4" and c.frames[-1] == "c2" and a.log_epoch is None and c.log_epoch is None


def test_frame_log_drops_epochs_no_row_needs():
    log = FrameLog()
    a = _request(1)
    rows = [a]
    log.step(rows, [0], attach=[a])
    for k in range(1, 300):  # an unchanged running set for many steps: epochs still rotate
        log.step(rows, [k], attach=[])
        if k % 10 == 0:
            log.settle(a)
    assert len(log._epochs) <= 2
    log.settle(a)
    assert a.frames == list(range(300))


_grid = np.arange(64, dtype=np.int64).reshape(8, 8)


@pytest.mark.parametrize("frames", [
    [np.full(4, k, np.int64) for k in range(5)],  # the usual batch: joined as bytes
    [np.full(4, k, np.int32) for k in range(3)],
    [np.full(4, k, ">i8") for k in range(3)],  # another byte order
    list(_grid),  # rows of one array (views, C-contiguous)
    [np.zeros((2, 3), np.int64), np.ones((2, 3), np.int64)],  # frames of more than one axis
    [np.full(4, 1, np.int64), np.full(4, 2.5)],  # mixed dtypes: np.array promotes
    [_grid[:, 0], _grid[:, 1]],  # strided views: not a buffer to join
    [[1, 2], [3, 4]], [np.array([1, 2]), [3, 4]], [np.int64(3), np.int64(4)],  # not all arrays
])
def test_codec_batch_codes_are_np_array_of_the_frames(frames):
    want, got = np.array(frames), stack_frames(frames)
    assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
    assert got.flags.writeable and got.flags.c_contiguous


def test_codec_batch_codes_of_frames_of_two_sizes_fail_as_np_array_does():
    frames = [np.zeros(3, np.int64), np.zeros(4, np.int64)]
    with pytest.raises(ValueError):
        np.array(frames)
    with pytest.raises(ValueError):
        stack_frames(frames)
