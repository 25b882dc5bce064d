"""Retry-After from the time the held requests still need, on a fake clock with jobs driven by events:
a run of refusals (and arrivals still waiting for their answer) must not pull it down to 1 s."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace
from typing import Any

import numpy as np

from voxcli.engine.load import EngineLoad
from voxcli.server.retry import RetryEstimator
from voxcli.server.service import SpeechService
from voxcli.speak import RequestTemplate


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class _Engine:
    """What the service reads of an engine here: its load (how many requests wait)."""

    def __init__(self) -> None:
        self.waiting = 0

    def load(self) -> EngineLoad:
        return EngineLoad(waiting=self.waiting)


def _service(clock: _Clock) -> SpeechService:
    engine = _Engine()
    session = SimpleNamespace(engine=engine, spec=SimpleNamespace(sample_rate=24000), model="fake")
    return SpeechService(session, clock=clock)


def _run(service: SpeechService, loop: asyncio.AbstractEventLoop, runner: Any) -> threading.Event:
    """Start one job with `runner`; the event is set once the service has seen it end."""
    ended = threading.Event()
    job = service.job(loop)
    on_end = job._on_end

    def end(j: Any) -> None:
        on_end(j)  # type: ignore[misc]
        ended.set()

    job._on_end = end
    # this job's session speaks through `runner` (an engine that holds or refuses it)
    job.session = SimpleNamespace(speak=lambda _source, _template, on_audio, stop, _options:
                                  runner(None, [], on_audio, 24000, stop))  # type: ignore[assignment]
    job.speak("Hello.", RequestTemplate())
    return ended


def _speaks(release: threading.Event, audio: threading.Event | None = None) -> Any:
    def runner(engine: Any, requests: Any, on_audio: Any, sr: int, stop: Any) -> None:
        on_audio(np.zeros(4, dtype=np.float32))
        if audio is not None:
            audio.set()
        release.wait(30)
    return runner


def _refused(release: threading.Event | None = None) -> Any:
    def runner(engine: Any, requests: Any, on_audio: Any, sr: int, stop: Any) -> None:
        if release is not None:
            release.wait(30)
        raise RuntimeError("overloaded: the queue is full")
    return runner


def test_refusals_and_pending_arrivals_do_not_lower_retry_after():
    clock = _Clock()
    service = _service(clock)
    loop = asyncio.new_event_loop()
    try:
        # two requests complete in 10 s each: the mean a request takes
        go = threading.Event()
        done = [_run(service, loop, _speaks(go)) for _ in range(2)]
        clock.now = 10.0
        go.set()
        assert all(e.wait(30) for e in done)
        # two long ones start at 10 s and are held
        hold = threading.Event()
        running = [threading.Event() for _ in range(2)]
        held = [_run(service, loop, _speaks(hold, running[i])) for i in range(2)]
        assert all(e.wait(30) for e in running)
        clock.now = 12.0
        # fifty refusals at 12 s (each ~0 s long), and twenty arrivals still waiting for their answer
        refusals = [_run(service, loop, _refused()) for _ in range(50)]
        assert all(e.wait(30) for e in refusals)
        answer = threading.Event()
        pending = [_run(service, loop, _refused(answer)) for _ in range(20)]
        # the held ones need 10 - 2 = 8 s more: the first slot frees then
        assert service.retry_after(None) == 8
        service.engine.waiting = 2  # two wait ahead: a second round of 10 s
        assert service.retry_after(None) == 18
        answer.set()
        hold.set()
        assert all(e.wait(30) for e in pending + held)
    finally:
        loop.close()


def test_the_estimate_needs_a_completion_and_a_held_request():
    clock = _Clock()
    est = RetryEstimator(clock=clock)
    assert est.seconds(0) is None
    est.ended("a", 0.0, completed=False)  # a refusal teaches nothing
    est.running("b", 0.0)
    assert est.seconds(0) is None and est.mean_duration() is None
    clock.now = 4.0
    est.ended("c", 0.0, completed=True)
    assert est.mean_duration() == 4.0
    clock.now = 5.0
    assert est.seconds(0) == 0.0  # b is past the mean: a slot is about to free
    est.running("d", 5.0)
    assert est.seconds(1) == 4.0  # the second slot: d, which needs its whole 4 s
    assert est.seconds(2) == 0.0 + 4.0  # the third: b's slot again, after one more request of 4 s
