"""The request book: every open request, the ones fed their text as it arrives, and how a request ends.

A request reaches a terminal state (done, failed, cancelled, rejected) here only. `end` takes it out of
every part that may hold it (each `RequestHolder.drop`: the LM batcher's queue and running rows, the codec
batcher's pending chunks, a remote frame source's queue), so no later decision sees it, and reports
`Ended`; what it holds (KV pages, a codec slot) goes back only when no batch in flight still uses it
(`maybe_release`, each holder's `release`, reported once as `Released`): a batch holding a row that ended
finishes first, and its completion releases the row. Cancelling is idempotent; `close` ends everything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from voxcli.engine.events import Ended, Event, Released
from voxcli.engine.request import Request, RequestState

S = RequestState


class RequestHolder(Protocol):
    """A scheduler part that may hold a request: in a queue or table (`drop`), or as resources that go
    back when no batch uses them any more (`release`: True when it gave something back)."""

    def drop(self, r: Request) -> None: ...
    def release(self, r: Request) -> bool: ...


class Forgetful(Protocol):
    """The admission policy's hook for a request that ended (admission_policies.py)."""

    def forget(self, r: Request) -> None: ...


class RequestBook:
    def __init__(self, admission: Forgetful) -> None:
        self.requests: dict[int, Request] = {}  # every non-terminal request, by id
        self.fed: dict[int, Request] = {}  # requests whose text is fed as it arrives (text_pacing.py)
        self._admission = admission
        self._holders: Sequence[RequestHolder] = ()

    def hold_with(self, *holders: RequestHolder) -> None:
        """The parts that may hold a request, in the order an ending takes it out of them."""
        self._holders = holders

    def open(self, r: Request) -> None:
        self.requests[r.id] = r
        if r.text_feed is not None:
            self.fed[r.id] = r

    def cancel(self, request_id: int, now: float) -> list[Event]:
        r = self.requests.get(request_id)
        if r is None:
            return []  # already finished (or unknown): cancelling is idempotent
        return self.end(r, S.CANCELLED, now, "cancelled by the user")

    def cancel_unarrived(self, r: Request, now: float) -> list[Event]:
        """End a request that was submitted but never reached `add` (virtual-time arrivals)."""
        return self.end(r, S.CANCELLED, now, "cancelled by the user")

    def fail(self, request_id: int, now: float, reason: str) -> list[Event]:
        """End a request as failed for a reason outside this engine (the other role's replica died)."""
        r = self.requests.get(request_id)
        return [] if r is None else self.end(r, S.FAILED, now, reason)

    def close(self, now: float, reason: str, idle: bool) -> list[Event]:
        """End every open request (the engine is closing) and release what no batch in flight still
        uses (`idle`: every batch came back, so no in-flight flag is still true)."""
        events: list[Event] = []
        for r in list(self.requests.values()):
            if idle:
                r.lm_inflight = r.chunk_inflight = False
            events += self.end(r, S.CANCELLED, now, reason)
        return events

    def end(self, r: Request, state: RequestState, now: float, reason: str | None) -> list[Event]:
        for holder in self._holders:
            holder.drop(r)
        self.requests.pop(r.id, None)
        self.fed.pop(r.id, None)
        r.state = state
        r.reason = reason
        self._admission.forget(r)
        tl = r.timeline
        tl.status, tl.reason, tl.finished, tl.frames = state.value, reason, now, r.n_frames
        return [Ended(r, now), *self.maybe_release(r)]

    def maybe_release(self, r: Request) -> list[Event]:
        """Pages and slot go back as soon as no batch in flight still uses them."""
        if r.lm_inflight or r.chunk_inflight:
            return []
        had = False
        for holder in self._holders:
            had = holder.release(r) or had
        return [Released(r)] if had else []
