"""The server's side of the engine: one session (engine + model spec), and one `SpeechJob` per request.

A job runs `Session.speak` — what `vox say` runs, so a request's audio is the CLI's audio — on its own
thread, and hands each PCM chunk to the asyncio side through `call_soon_threadsafe`. The engine's
streams block; the event loop must not. `cancel()` (client gone) sets the job's stop flag and cancels
every stream it submitted, so the engine frees the request's pages and slot at its next step.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, cast

import numpy as np

from voxcli.engine.slack import decode_slack
from voxcli.models.base import SynthesisRequest
from voxcli.server.retry import RetryEstimator
from voxcli.speak import RequestTemplate, SpeechStats, Stopped
from voxcli.speak_choice import SpeakOptions

if TYPE_CHECKING:
    from voxcli.engine.load import EngineLoad
    from voxcli.session import Session
    from voxcli.speech_engine import ServedEngine, SpeechStream

# The engine's host loop shares the GIL with the event loop and the job threads: a waiting thread gets it
# only at the switch interval (5 ms by default), which a deadline scheduler feels. Every process that
# serves an engine (`vox serve`, each Ray replica) sets this one value.
SWITCH_INTERVAL_S = 0.0005


@dataclass
class Limits:
    max_input_chars: int = 4096  # OpenAI's own limit for /v1/audio/speech
    max_body_bytes: int = 64 * 1024
    max_ws_chars: int = 100_000  # text one WebSocket session may stream in
    header_timeout_s: float = 10.0  # a connection must complete its request's headers within this
    body_timeout_s: float = 10.0  # ...and then its body within this (slowloris, stalled bodies)
    idle_timeout_s: float = 5.0  # a kept-alive connection with no new request is closed after this
    write_stall_s: float = 10.0  # a client that reads none of a streamed body for this long is dropped
    max_unread_bytes: int = 1 << 20  # streamed audio a client may leave unread before generation waits
    ws_start_timeout_s: float = 10.0  # a WebSocket must send its start message within this
    ws_idle_timeout_s: float = 120.0  # ...and then some text at least this often until its end


@dataclass
class Item:
    kind: str  # "audio" | "end" | "error" | "sentence" (text streaming in: a sentence is being spoken)
    pcm: np.ndarray | None = None
    text: str | None = None
    stats: SpeechStats | None = None
    error: BaseException | None = None
    t: float = field(default_factory=time.perf_counter)


class SpeechJob:
    """One utterance spoken on a thread; audio items come out of `next()` (asyncio side)."""

    def __init__(self, session: Session, loop: asyncio.AbstractEventLoop,
                 on_end: Callable[[SpeechJob], None] | None = None,
                 on_running: Callable[[SpeechJob], None] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.session = session
        self.loop = loop
        self.queue: asyncio.Queue[Item] = asyncio.Queue()
        self.stop = threading.Event()
        self.streams: list[SpeechStream] = []
        self._lock = threading.Lock()
        self._on_end = on_end
        self._on_running = on_running
        self.started = clock()
        self.completed = False  # it spoke everything (not refused, failed or cancelled)
        self.produced = False  # it has produced audio: the engine runs it

    def put(self, item: Item) -> None:
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the event loop is gone (server shutting down): nobody is listening
            self.cancel()

    def speak(self, source: str | Iterable[str], template: RequestTemplate,
              options: SpeakOptions | None = None) -> None:
        """Speak `source` (a text, or an iterator that blocks for the next fragment) on a thread."""
        options = replace(options or SpeakOptions(), on_stream=self._track)
        self._run(lambda: self.session.speak(source, template, self._audio, self.stop, options))

    def speak_prepared(self, requests: Sequence[SynthesisRequest]) -> None:
        """Requests another session shaped (a Ray replica serving its driver's segment), on a thread."""
        options = SpeakOptions(on_stream=self._track)
        self._run(lambda: self.session.speak_prepared(requests, self._audio, self.stop, options))

    def _track(self, stream: SpeechStream) -> None:
        """Every stream the job submits: kept so a cancel reaches it, and cancelled at once when the job
        was stopped meanwhile (cancel() may have missed it)."""
        stream.keep_audio(False)  # a server never calls wait(): forget each chunk once it is sent
        with self._lock:
            self.streams.append(stream)
        if self.stop.is_set():
            stream.cancel()
            raise Stopped()

    def _run(self, speak: Callable[[], SpeechStats]) -> None:
        def work() -> None:
            try:
                stats = speak()
                self.completed = not self.stop.is_set()
                self.put(Item("end", stats=stats))
            except BaseException as e:  # noqa: BLE001 - every outcome goes to the client side
                self.put(Item("error", error=e))
            finally:
                if self._on_end is not None:
                    self._on_end(self)

        _pool().submit(work)

    def _audio(self, pcm: np.ndarray) -> None:
        if not self.produced:
            self.produced = True
            if self._on_running is not None:
                self._on_running(self)
        self.put(Item("audio", pcm=pcm))

    async def next(self) -> Item:
        return await self.queue.get()

    def cancel(self) -> None:
        """Stop: no new segment starts, every submitted stream is cancelled (never blocks for long: it
        runs on the event loop)."""
        self.stop.set()
        with self._lock:
            streams = list(self.streams)
        for s in streams:
            s.cancel()


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """The job threads, reused: starting a thread per request costs the event loop a GIL round trip
    (Thread.start waits for the new thread), which under load is most of a request's server time."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=4096, thread_name_prefix="vox-serve-job")
        return _POOL


class SpeechService:
    """The engine session behind the API: model name, spec, limits, the engine's load for the gauges."""

    def __init__(self, session: Session, limits: Limits | None = None, model_id: str | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.session = session
        # a server's session runs an Engine or the Ray front door: both report their load
        self.engine = cast("ServedEngine", session.engine)
        self.spec = session.spec
        self.model_id = model_id or session.model
        self.limits = limits or Limits()
        self.clock = clock  # arrival and end times of the jobs (a test's fake clock)
        self.retry = RetryEstimator(clock=clock)
        self.active = 0  # jobs between start and end (the metrics read it)
        self._lock = threading.Lock()
        self._seq = 0

    def check(self, request: SynthesisRequest) -> None:
        """The model's cheap check (voice, language, options...): raises InputError."""
        self.session.check(request)

    def job(self, loop: asyncio.AbstractEventLoop) -> SpeechJob:
        with self._lock:
            self.active += 1
        return SpeechJob(self.session, loop, on_end=self._ended,
                         on_running=self._running, clock=self.clock)

    def _running(self, job: SpeechJob) -> None:
        self.retry.running(id(job), job.started)

    def _ended(self, job: SpeechJob) -> None:
        with self._lock:
            self.active -= 1
        self.retry.ended(id(job), job.started, job.completed)

    def retry_after(self, estimate: float | None) -> int:
        """Seconds for Retry-After: the admission's own estimate when it gave one, else the time the
        requests the server holds still need to make room for those waiting and this one
        (`voxcli.server.retry`; 1 s with no basis yet), clamped to [1, 60]."""
        if estimate is None:
            estimate = self.retry.seconds(self.queued())
        return int(min(60, max(1, math.ceil(estimate or 1.0))))

    def routing_stats(self, utilization: float = 0.6) -> dict[str, float]:
        """For the scale-out router: the engine's slack (voxcli/engine/slack.py) and a report number."""
        self._seq += 1
        return {**decode_slack(self.engine, utilization), "seq": float(self._seq)}

    # --- engine state for /health and /metrics (read from another thread: approximate by nature) ---
    def load(self) -> EngineLoad:
        """The engine's load snapshot (engine/load.py); a placement's front door sums its replicas'."""
        return self.engine.load()

    def queued(self) -> int:
        return self.load().waiting

    def kv_pages_used(self) -> int:
        return self.load().kv_pages_used

    def codec_slots_used(self) -> int:
        return self.load().codec_slots_used

    @property
    def dead(self) -> str | None:
        return self.engine.dead

    def close(self) -> None:
        self.session.close()
