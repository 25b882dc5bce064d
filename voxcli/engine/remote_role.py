"""The remote role (config role codec, engine/roles.py): chunks whose LM runs in another engine.

Such a request never prefills here: it waits (FIFO, continuations first) for a codec slot, with its
worst-case growing codec state reserved beside it when the memory plan budgets that state (the LM engine
sends the figure with the chunk: `CodeChunk.state_bytes`; one that could never fit is refused), and then
counts as running while its frames arrive a chunk at a time (`feed_remote`); the codec lanes decode its
chunks as any other's. The engine binds the slot to the request's codec state (`bind_remote`) the moment
it is acquired; a request the binding fails on ends alone, its events kept for `take_unreported`.
"""

from __future__ import annotations

import numpy as np

from voxcli.engine.chunk_flow import ChunkFlow
from voxcli.engine.events import Event
from voxcli.engine.request import Request
from voxcli.engine.scheduler_state import S, describe
from voxcli.engine.sentences import queue_continuation


class RemoteRole(ChunkFlow):
    def open_remote(self, r: Request, now: float) -> list[Event]:
        """Role codec: a request whose LM runs in another engine; it waits (FIFO) for a codec slot."""
        if r.id in self.requests:
            raise ValueError(f"request id {r.id} is already in the engine")
        if self.slots.never_fits(r.state_bytes):
            return self._end(r, S.REJECTED, now,
                             f"the request's codec state needs {r.state_bytes / 1e9:.2f} GB but this codec "
                             f"engine's memory plan holds {self.slots.state_bytes / 1e9:.2f} GB for all "
                             "requests; shorten the text, lower max_frames or free memory")
        self.requests[r.id] = r
        if r.continuation:  # a later sentence: ahead of new requests for a slot, as in `add`
            queue_continuation(self.waiting, r)
        else:
            self.waiting.append(r)
        self._admit_remote(now)
        return []

    def _admit_remote(self, now: float) -> None:
        while self.waiting and self.slots.free:
            slot = self.slots.acquire(self.waiting[0].id, self.waiting[0].state_bytes)
            if slot is None:
                break  # its codec state waits (FIFO) for others' to be released
            r = self.waiting.popleft()
            r.slot = slot
            if self.bind_remote is not None:
                try:
                    self.bind_remote(r)
                except Exception as e:  # noqa: BLE001 - this request alone fails, never with wrong audio
                    self.unreported += self._end(r, S.FAILED, now, "internal error: its codec slot could not "
                                                 f"take the request's state: {describe(e)}")
                    continue
            r.state = S.DECODE  # "the LM is generating": its frames arrive in chunks
            r.timeline.admitted = now
            r.timeline.status = S.DECODE.value
            self.decoding[r.id] = r
            self.decoding_rows += r.prompt.width
            # a chunk 0 always holds a frame, so this only pends chunks (it never ends the request)
            self._remote_ready(r, now)

    def take_unreported(self) -> list[Event]:
        """Events of requests ended inside `decide` / `open_remote` (a codec slot that took no state)."""
        events, self.unreported = self.unreported, []
        return events

    def feed_remote(self, r: Request, codes: np.ndarray, last: bool, now: float) -> list[Event]:
        """Role codec: the next chunk's frames of `r` arrived (in order; `last`: the LM is done)."""
        if r.state.terminal:
            return []
        r.frames.extend(codes)  # (n_frames counts them: a remote request is never in the frame log)
        if last:
            r.frame_cap = r.n_frames  # the LM stopped here
        if r.state is S.QUEUED:
            return []  # buffered until a slot frees
        return self._remote_ready(r, now)

    def _remote_ready(self, r: Request, now: float) -> list[Event]:
        if r.state is S.DECODE and r.n_frames >= r.frame_cap:
            self._lm_finished(r)
        if (r.n_frames >= r.next_end or r.state is S.DRAINING) and not r.chunk_inflight \
                and r.id not in self.pending:
            return self._advance_chunks(r, now)
        return []
