"""Endings: a request reaches a terminal state (done, failed, cancelled, rejected) and gives back what
it holds.

`_end` takes the request out of every queue and table at once (so no later decision sees it) and
reports `Ended`; its KV pages and codec slot go back only when no batch in flight still uses them
(`_maybe_release`, which reports `Released`): a batch holding a row that ended finishes first, and its
completion releases the row. Cancelling is idempotent; `close` ends everything open.
"""

from __future__ import annotations

from voxcli.engine.events import Ended, Event, Released
from voxcli.engine.request import Request, RequestState
from voxcli.engine.scheduler_state import S, SchedulerState


class Endings(SchedulerState):
    def cancel(self, request_id: int, now: float) -> list[Event]:
        r = self.requests.get(request_id)
        if r is None:
            return []  # already finished (or unknown): cancelling is idempotent
        return self._end(r, S.CANCELLED, now, "cancelled by the user")

    def cancel_unarrived(self, r: Request, now: float) -> list[Event]:
        """End a request that was submitted but never reached `add` (virtual-time arrivals)."""
        return self._end(r, S.CANCELLED, now, "cancelled by the user")

    def fail(self, request_id: int, now: float, reason: str) -> list[Event]:
        """End a request as failed for a reason outside this engine (the other role's replica died)."""
        r = self.requests.get(request_id)
        return [] if r is None else self._end(r, S.FAILED, now, reason)

    def close(self, now: float, reason: str) -> list[Event]:
        """End every open request (the engine is closing) and release what no batch in flight still
        uses; requests ended earlier whose batch has completed since are released too."""
        events: list[Event] = []
        idle = not any(self.busy.values())  # every batch came back: no in-flight flag is still true
        for r in list(self.requests.values()):
            if idle:
                r.lm_inflight = r.chunk_inflight = False
            events += self._end(r, S.CANCELLED, now, reason)
        return events

    def _end(self, r: Request, state: RequestState, now: float, reason: str | None) -> list[Event]:
        self._log.detach(r)
        r.next_ready = None  # (it refers back to r: no cycle left for the GC)
        if r.state is S.QUEUED:
            try:
                self.waiting.remove(r)
            except ValueError:
                pass  # a rejected request never entered the queue
        if self._decode_all and r.id in self.decoding:
            r.lm_inflight = True  # it is in the decode step now running (see LmLane._launch_decode)
        if r.lm_inflight:
            self._ended_in_lm.add(r.id)
        if self.decoding.pop(r.id, None) is not None:
            self._decode_batch = None
            self.decoding_rows -= r.prompt.width
        if r.id in self.pending:
            self.chunks.remove(self.pending[r.id])
        self.requests.pop(r.id, None)
        self.fed.pop(r.id, None)
        r.state = state
        r.reason = reason
        self.admission.forget(r)
        tl = r.timeline
        tl.status, tl.reason, tl.finished, tl.frames = state.value, reason, now, r.n_frames
        events: list[Event] = [Ended(r, now)]
        if not self.waiting:
            self.defer_since = None  # nothing left to defer
        return events + self._maybe_release(r)

    def _maybe_release(self, r: Request) -> list[Event]:
        """Pages and slot go back as soon as no batch in flight still uses them."""
        if r.lm_inflight or r.chunk_inflight:
            return []
        had = bool(r.pages) or r.slot >= 0
        if r.pages:
            self.kv.release(r.pages, r.id)
            r.pages = []
        if r.slot >= 0:
            self.slots.release(r.slot, r.id)
            r.slot = -1
        return [Released(r)] if had else []
