"""AudioStream: what `Engine.submit` hands back. A thread-safe, single-consumer stream of PCM chunks.

Iterating yields `AudioChunk`s as the engine delivers them (blocking on a real-clock engine) and
stops after the last one. If the request fails or is refused, iteration raises `RequestFailed` /
`RequestRejected` after the chunks delivered so far; a cancelled stream just stops. `wait()` returns
the whole waveform (or raises, `RequestCancelled` included). On a virtual-time (sim) engine the stream
drives `engine.run()` itself when it needs more."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from voxcli.engine.request import Timeline


class EngineError(Exception):
    """Base of the engine's errors."""


class RequestRejected(EngineError):
    """The engine refused the request (queue full, too large for the KV pool...). Message says why.
    `retry_after` (seconds, or None) is the admission's estimate of when a retry could be served."""

    def __init__(self, message: str = "", retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RequestFailed(EngineError):
    """The request failed while being served (a stage raised). Message says which stage and why."""


class RequestCancelled(EngineError):
    """The request was cancelled before it finished."""


class EngineClosed(EngineError):
    """The engine is closed (or its host loop died; the message says why)."""


@dataclass(frozen=True)
class AudioChunk:
    pcm: np.ndarray  # float32 mono
    sample_rate: int
    index: int  # chunk number within the request
    t_delivered: float  # engine clock (seconds)
    audio_offset_s: float  # where this chunk starts in the request's audio
    last: bool


_DONE_STATES = ("done", "failed", "cancelled", "rejected")


class AudioStream:
    def __init__(self, request_id: int, name: str | None, sample_rate: int, timeline: Timeline,
                 cancel: Callable[[int], None], pump: Callable[[], None] | None = None) -> None:
        self.request_id = request_id
        self.name = name
        self.sample_rate = sample_rate
        self.timeline = timeline
        self._cancel = cancel
        self._pump = pump  # virtual time: run the engine instead of blocking
        self._cond = threading.Condition()
        self._chunks: list[AudioChunk] = []
        self._read = 0
        self._status = "queued"
        self._reason: str | None = None
        self.retry_after: float | None = None  # set on a refusal when the admission estimated one
        self._keep = True  # keep every chunk (for wait()); see keep_audio()
        self._store = True  # store pushed chunks at all; see drop_audio()
        # a continuation (Engine.submit(continues=...)): when its user request's earlier audio ends
        self.playback_from: float | None = None

    # --- memory: a long-running consumer that only measures -------------------------------------
    def keep_audio(self, keep: bool) -> None:
        """`False`: a chunk is forgotten once iterated (memory stays flat over a long run; `wait()`
        then returns only what was not iterated yet)."""
        self._keep = keep

    def drop_audio(self) -> None:
        """Keep no audio at all: the consumer reads only `timeline` and the status (a benchmark in
        virtual time). Iterating then yields no chunks; `wait()` returns an empty waveform."""
        with self._cond:
            self._store = False
            self._chunks.clear()
            self._read = 0

    # --- engine side (host thread) -----------------------------------------------------------
    def deliver(self, chunk: AudioChunk) -> None:
        """A chunk of the request's audio, as the engine makes it (the stream turns `streaming`)."""
        with self._cond:
            if self._store:
                self._chunks.append(chunk)
            if self._status == "queued":
                self._status = "streaming"
            self._cond.notify_all()

    def end(self, status: str, reason: str | None, retry_after: float | None = None) -> None:
        """The request is over with `status` (done, failed, cancelled, rejected); a second end is ignored."""
        with self._cond:
            if self._status in _DONE_STATES:
                return
            self._status, self._reason, self.retry_after = status, reason, retry_after
            self._cond.notify_all()

    # --- user side -----------------------------------------------------------------------------
    @property
    def status(self) -> str:
        """queued | streaming | done | failed | cancelled | rejected"""
        return self._status

    @property
    def reason(self) -> str | None:
        return self._reason

    @property
    def finished(self) -> bool:
        return self._status in _DONE_STATES

    def cancel(self) -> None:
        self._cancel(self.request_id)

    def raise_for_status(self, cancelled_raises: bool = False) -> None:
        """Raise the stream's ending as its error (RequestFailed, RequestRejected; RequestCancelled only
        when `cancelled_raises`); nothing while it runs or once it is done."""
        if self._status == "failed":
            raise RequestFailed(f"request {self.request_id} failed: {self._reason}")
        if self._status == "rejected":
            raise RequestRejected(f"request {self.request_id} was refused: {self._reason}", self.retry_after)
        if self._status == "cancelled" and cancelled_raises:
            raise RequestCancelled(f"request {self.request_id} was cancelled ({self._reason})")

    def _next_chunk(self, timeout: float | None) -> AudioChunk | None:
        """The next unread chunk, or None once the stream is over. Raises TimeoutError."""
        if self._pump is not None:
            with self._cond:
                need = self._read >= len(self._chunks) and not self.finished
            if need:
                self._pump()
        with self._cond:
            if not self._cond.wait_for(lambda: self._read < len(self._chunks) or self.finished, timeout):
                raise TimeoutError(f"request {self.request_id}: no audio within {timeout} s")
            if self._read < len(self._chunks):
                chunk = self._chunks[self._read]
                self._read += 1
                if not self._keep:
                    del self._chunks[:self._read]
                    self._read = 0
                return chunk
            return None

    def take(self) -> tuple[list[AudioChunk], bool]:
        """The chunks not read yet (now forgotten) and whether the stream is over (then `raise_for_status`);
        never blocks: a consumer told of a change (an asyncio one, engine/roles.py) reads what is there."""
        with self._cond:
            new = self._chunks[self._read:]
            self._chunks, self._read = [], 0
            return new, self.finished

    def __iter__(self) -> Iterator[AudioChunk]:
        while True:
            chunk = self._next_chunk(None)
            if chunk is None:
                self.raise_for_status(cancelled_raises=False)
                return
            yield chunk

    def wait(self, timeout: float | None = None) -> np.ndarray:
        """The whole waveform once the request is done (all chunks, including ones already iterated)."""
        if self._pump is not None and not self.finished:
            self._pump()
        with self._cond:
            if not self._cond.wait_for(lambda: self.finished, timeout):
                raise TimeoutError(f"request {self.request_id} not finished within {timeout} s")
            self.raise_for_status(cancelled_raises=True)
            if not self._chunks:
                return np.zeros(0, dtype=np.float32)
            return np.concatenate([c.pcm for c in self._chunks]).astype(np.float32, copy=False)
