"""A request whose preparation never ends fails with one sentence while its neighbour completes, and the
engine still closes (engine/prepare_guard.py). The deadline is driven by an event, not the wall clock:
the guard's `wait` returns "expired" only once the test says time has passed, so no outcome depends on
how fast anything runs."""

from __future__ import annotations

import threading

import pytest
from voxcli.models.base import SynthesisRequest

from voxcli.engine.prepare_guard import PrepareClosed, PrepareGuard, PrepareTimeout


class DrivenDeadline:
    """The guard's `wait`: returns True as soon as the work is done, False once `expire()` was called
    while it was not (the test's clock passing the limit)."""

    def __init__(self) -> None:
        self.expired = threading.Event()

    def wait(self, done: threading.Event, limit_s: float) -> bool:
        while not done.wait(0.01):  # polls two events; which one is set decides, never elapsed time
            if self.expired.is_set():
                return done.is_set()
        return True


def test_a_stuck_work_fails_with_one_sentence_and_is_counted_until_it_ends():
    deadline, gate, entered = DrivenDeadline(), threading.Event(), threading.Event()
    guard = PrepareGuard(limit_s=10, wait=deadline.wait, max_stuck=1)
    assert guard.run(lambda: 7) == 7
    with pytest.raises(ZeroDivisionError):
        guard.run(lambda: 1 / 0)

    def stuck() -> int:
        entered.set()
        gate.wait()
        return 1

    deadline.expired.set()
    with pytest.raises(PrepareTimeout, match=r"^preparing the request took longer than 10 s, so the request "
                                             r"was abandoned; shorten its text or its options \(a slow "
                                             r"machine may raise the limit: --set "
                                             r"prepare_limit_s=SECONDS\)\.$"):
        guard.run(stuck)
    assert entered.is_set() and guard.stuck == 1
    with pytest.raises(PrepareTimeout, match="takes no new requests until one does"):
        guard.run(lambda: 2)  # at the bound of abandoned work: refused, no thread started
    gate.set()
    for _ in range(3000):  # the abandoned worker takes itself off the count when it returns (waits for
        if guard.stuck == 0:  # that event, at most 30 s; how soon never decides the outcome)
            break
        threading.Event().wait(0.01)
    assert guard.stuck == 0
    assert guard.run(lambda: 3) == 3  # and new work is taken again


def test_close_releases_a_submitter_waiting_on_a_stuck_preparation_at_once():
    """A shutdown does not wait out the limit: the waiter (on the real clock, a limit of 1000 s) is
    released by close, and nothing new is taken."""
    guard, gate, entered = PrepareGuard(limit_s=1000), threading.Event(), threading.Event()
    raised: list[BaseException] = []

    def stuck() -> None:
        entered.set()
        gate.wait()

    def submit() -> None:
        try:
            guard.run(stuck)
        except PrepareClosed as e:
            raised.append(e)

    t = threading.Thread(target=submit)
    t.start()
    assert entered.wait(30)
    guard.close()
    t.join(30)
    try:
        assert not t.is_alive() and len(raised) == 1 and str(raised[0]) == "the engine was closed"
        with pytest.raises(PrepareClosed):
            guard.run(lambda: 1)
    finally:
        gate.set()


def test_a_request_whose_prepare_never_ends_fails_while_its_neighbour_completes():
    from voxcli.session import sim_session

    session = sim_session("qwen3-tts-1.7b", "h100")  # real-time: the engine loop runs on its thread
    engine = session.engine
    deadline, gate, entered = DrivenDeadline(), threading.Event(), threading.Event()
    engine.prepare_guard = PrepareGuard(limit_s=10, wait=deadline.wait)
    program = engine.program
    prepare = program.prepare

    def hostile_prepare(request: SynthesisRequest):  # type: ignore[no-untyped-def]
        if "stuck" in request.text:
            entered.set()
            gate.wait()  # never ends while the test runs
        return prepare(request)

    program.prepare = hostile_prepare
    try:
        neighbour = engine.submit(SynthesisRequest(text="Hello there, neighbour.", fixed_frames=6))
        failed: list[BaseException] = []

        def submit_stuck() -> None:
            try:
                engine.submit(SynthesisRequest(text="stuck forever"))
            except PrepareTimeout as e:
                failed.append(e)

        t = threading.Thread(target=submit_stuck)
        t.start()
        assert entered.wait(30)
        deadline.expired.set()  # the limit passes for the stuck request only: the neighbour was done
        t.join(30)
        assert len(failed) == 1 and str(failed[0]).startswith("preparing the request took longer than 10 s")
        chunks = list(neighbour)  # the loop goes on: the neighbour's audio comes whole
        assert chunks and chunks[-1].last
        # one more stuck request, its limit not passed, while the engine closes: released as closed
        from voxcli.engine.stream import EngineClosed

        entered.clear()
        engine.prepare_guard.wait = DrivenDeadline().wait  # a clock that never passes the limit
        closed: list[BaseException] = []

        def submit_while_closing() -> None:
            try:
                engine.submit(SynthesisRequest(text="stuck again"))
            except EngineClosed as e:
                closed.append(e)

        t = threading.Thread(target=submit_while_closing)
        t.start()
        assert entered.wait(30)
        closer = threading.Thread(target=session.close)
        closer.start()
        closer.join(30)  # close does not wait for the stuck preparations (still blocked on `gate`)
        t.join(30)
        assert not closer.is_alive() and not gate.is_set() and len(closed) == 1
    finally:
        gate.set()
        session.close()


def test_the_engine_takes_its_preparation_limit_from_the_config():
    """A CPU running a real-size speaker model (Zonos' ResNet293: 247 s for a 3 s clip here) needs more
    than the default 10 s: `--set prepare_limit_s=...` sets it; a limit that is no number of seconds is
    refused by name."""
    from voxcli.config import ConfigError, EngineConfig
    from voxcli.session import sim_session

    session = sim_session("qwen3-tts-1.7b", "h100", sets=["prepare_limit_s=300"])  # what --set passes
    try:
        assert session.engine.prepare_guard.limit_s == 300.0
    finally:
        session.close()
    for bad in (0.0, -1.0, float("inf")):
        with pytest.raises(ConfigError, match="prepare_limit_s must be"):
            EngineConfig(model="demo", prepare_limit_s=bad).validate()
