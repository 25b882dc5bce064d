"""The Engine API: submit/iterate/wait/cancel/close on a real-clock cpu engine (synthetic program) and
virtual time (sim)."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from voxcli.models.base import InputError, SynthesisRequest

from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.engine import Engine, EngineClosed, RequestCancelled, RequestFailed
from voxcli.sim.synthetic import SyntheticProgram


class SlowProgram(SyntheticProgram):
    """Decode takes a little real time, so cancels and closes land mid-stream."""

    def __init__(self, step_s: float = 0.003):
        super().__init__(sample_rate=100, samples_per_frame=8, pcm_scale=1.0)
        self.step_s = step_s
        self.released = 0

    def decode(self, rows):
        threading.Event().wait(self.step_s)
        return super().decode(rows)

    def release(self, row):
        self.released += 1


def expected(frames: int) -> np.ndarray:
    return np.repeat(np.arange(frames, dtype=np.float32), 8)


@pytest.fixture
def engine():
    prog = SlowProgram()
    eng = Engine(prog, EngineConfig(executor="cpu", policy="full", background_min_batch=2))
    yield eng, prog
    eng.close()


def test_input_error_raises_on_submit(engine):
    eng, _ = engine
    with pytest.raises(InputError, match="text is empty"):
        eng.submit(SynthesisRequest(text="   "))


def test_many_concurrent_clients(engine):
    eng, prog = engine
    results: dict[tuple[int, int], np.ndarray] = {}

    def client(k):
        streams = [(n, eng.submit(SynthesisRequest(text="hi", fixed_frames=n))) for n in (3, 17, 30)]
        for n, s in streams:
            chunks = list(s)
            assert [c.index for c in chunks] == list(range(len(chunks))) and chunks[-1].last
            assert all(c.sample_rate == 100 for c in chunks)
            results[(k, n)] = np.concatenate([c.pcm for c in chunks])
            assert s.status == "done" and s.timeline.ttfa is not None and s.timeline.ttfa >= 0

    threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(results) == 12
    for (_, n), audio in results.items():
        assert np.array_equal(audio, expected(n))
    assert eng.scheduler.idle
    assert eng.scheduler.kv.free == eng.config.kv_pages and eng.scheduler.slots.free == eng.config.codec_slots


def test_cancel_mid_stream(engine):
    eng, _ = engine
    s = eng.submit(SynthesisRequest(text="long", fixed_frames=400))
    it = iter(s)
    first = next(it)
    assert first.index == 0
    s.cancel()
    rest = list(it)  # a cancelled stream just stops
    assert s.status == "cancelled" and len(rest) < 60
    with pytest.raises(RequestCancelled):
        s.wait(timeout=10)
    other = eng.submit(SynthesisRequest(text="next", fixed_frames=12))
    assert np.array_equal(other.wait(timeout=30), expected(12))


def test_failure_fails_only_that_request(engine):
    eng, _ = engine
    bad = eng.submit(SynthesisRequest(text="oops [fail:decode@5]", fixed_frames=20))
    good = eng.submit(SynthesisRequest(text="fine", fixed_frames=20))
    with pytest.raises(RequestFailed, match="injected decode failure at frame 5"):
        bad.wait(timeout=30)
    assert np.array_equal(good.wait(timeout=30), expected(20))
    with pytest.raises(RequestFailed):
        list(bad)


def test_close_cancels_open_streams_and_refuses_new_ones():
    prog = SlowProgram(step_s=0.01)
    with Engine(prog, EngineConfig(executor="cpu")) as eng:
        s = eng.submit(SynthesisRequest(text="long", fixed_frames=2000))
    assert s.status == "cancelled" and "closed" in s.reason
    with pytest.raises(EngineClosed):
        eng.submit(SynthesisRequest(text="late"))


def test_sim_engine_from_config_virtual_time():
    eng = Engine.from_config(EngineConfig(executor="sim"))
    a = eng.submit(SynthesisRequest(text="a", fixed_frames=50), at=0.5)
    b = eng.submit(SynthesisRequest(text="b", fixed_frames=30), at=1.0)
    c = eng.submit(SynthesisRequest(text="c", fixed_frames=300), at=1.0)
    eng.cancel(c.request_id, at=1.5)
    eng.run()
    assert a.status == b.status == "done" and c.status == "cancelled"
    assert a.timeline.arrival == 0.5 and a.timeline.admitted >= 0.5 and 0 < a.timeline.ttfa < 0.2
    # the sim's stand-in for the default model has its family's sim chunk schedule (10-frame chunks)
    assert eng.config.chunk == ChunkSchedule(first=10, steady=10)
    assert a.wait().shape[0] == 50 * 1920 and len(a.timeline.chunks) == 5
    assert c.timeline.finished == pytest.approx(1.5)
    assert eng.now >= 1.5
    # streams on a virtual-time engine pump run() themselves
    d = eng.submit(SynthesisRequest(text="d", fixed_frames=8), at=eng.now + 1)
    assert d.wait().shape[0] == 8 * 1920
    with Engine(SyntheticProgram(), EngineConfig(executor="cpu")) as real, pytest.raises(ValueError):
        real.submit(SynthesisRequest(text="x"), at=1.0)
