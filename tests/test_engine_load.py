"""`Engine.load()`: the one read-only view of what an engine holds, on a virtual-time (sim) engine whose
clock the test drives. Every reader outside the engine (the server's gauges, the Ray replicas' signals,
the routing slack, the bench's counters) reads this snapshot instead of the scheduler's parts."""

from __future__ import annotations

import pytest
from voxcli.models.base import SynthesisRequest

from voxcli.config import EngineConfig
from voxcli.engine.engine import Engine, EngineClosed
from voxcli.engine.load import NO_LATE_CHUNKS, EngineLoad
from voxcli.engine.slack import decode_slack
from voxcli.sim.synthetic import SyntheticProgram


def _engine(max_running: int = 2) -> Engine:
    cfg = EngineConfig(executor="sim", policy="full", admission="deadline", max_running=max_running,
                       kv_pages=64, codec_slots=4, max_queue=8)
    return Engine(SyntheticProgram(samples_per_frame=1920), cfg)


def test_an_idle_engine_holds_nothing() -> None:
    eng = _engine()
    assert eng.load() == EngineLoad()
    assert eng.load().late_chunks == NO_LATE_CHUNKS and not eng.closed and eng.dead is None


def test_the_load_follows_the_requests_through_the_engine() -> None:
    eng = _engine(max_running=2)
    streams = [eng.submit(SynthesisRequest(text=f"request {i}", fixed_frames=400), at=0.0) for i in range(3)]
    eng.run(until=0.5)  # virtual seconds: two decode, the third waits for a row
    load = eng.load()
    assert (load.open_requests, load.decoding, load.waiting, load.running) == (3, 2, 1, 2)
    assert load.kv_pages_used > 0 and load.codec_slots_used >= 1
    assert load.held == load.decoding + load.prefilling + load.waiting
    slack = decode_slack(eng)
    assert slack["held"] == load.held and slack["slack"] == slack["capacity"] - load.held
    streams[0].cancel()
    eng.run()
    end = eng.load()
    assert (end.open_requests, end.waiting, end.decoding, end.kv_pages_used, end.codec_slots_used) == (0,) * 5
    assert set(end.late_chunks) == set(NO_LATE_CHUNKS)  # the codec batcher's counters, by the same names


def test_a_snapshot_is_a_copy_that_the_engine_does_not_change_later() -> None:
    eng = _engine()
    eng.submit(SynthesisRequest(text="hello", fixed_frames=400), at=0.0)
    eng.run(until=0.1)  # (a virtual-time arrival reaches the scheduler when the clock passes it)
    before = eng.load()
    eng.run()
    assert before.open_requests == 1 and eng.load().open_requests == 0
    with pytest.raises(AttributeError):
        before.waiting = 5  # type: ignore[misc]  # frozen: a reader cannot write back into the engine


def test_closed_and_dead_are_read_only_views_of_the_engine() -> None:
    eng = _engine()
    eng.close()
    assert eng.closed and eng.dead is None
    with pytest.raises(EngineClosed):
        eng.submit(SynthesisRequest(text="late"))
    with pytest.raises(AttributeError):
        eng.closed = False  # type: ignore[misc]
