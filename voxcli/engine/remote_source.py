"""The remote frame source (a codec-only engine, engine/roles.py): requests whose LM runs in another
engine, feeding a codec batcher chunk by chunk.

Wired in place of the LM batcher (engine/scheduler.py). Such a request never prefills here: it waits
(FIFO, continuations first) for a codec slot from the codec batcher's table, with its worst-case growing
codec state reserved beside it when the memory plan budgets that state (the LM engine sends the figure
with the chunk: `CodeChunk.state_bytes`; one that could never fit is refused), and then counts as running
while its frames arrive a chunk at a time (`feed`); the codec batcher decodes its chunks as any other's.
The engine binds the slot to the request's codec state (`bind`) the moment it is acquired; a request
the binding fails on ends alone, its events kept for `take_unreported`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np

from voxcli.engine.codec_batcher import CodecBatcher
from voxcli.engine.events import Event
from voxcli.engine.request import Request, RequestState
from voxcli.engine.request_book import RequestBook
from voxcli.engine.sentences import queue_continuation
from voxcli.engine.stage_errors import describe

S = RequestState


class RemoteFrameSource:
    def __init__(self, book: RequestBook, codec: CodecBatcher) -> None:
        self._book = book
        self._codec = codec
        self._slots = codec.slots
        self.waiting: deque[Request] = deque()  # requests waiting for a codec slot
        self.decoding: dict[int, Request] = {}  # requests holding a slot whose LM is still generating
        self.decoding_rows = 0
        self.prefilling = 0  # (never: a remote request does not prefill here)
        # the engine gives a request's codec slot its state (program.bind_codec_slot) the moment the slot
        # is acquired, before any chunk of it can launch; a request it fails on ends, its events wait in
        # `unreported` for the engine (`take_unreported`)
        self.bind: Callable[[Request], None] | None = None
        self._unreported: list[Event] = []

    @property
    def idle(self) -> bool:
        return not self.decoding

    def drop(self, r: Request) -> None:
        """The request ended (request_book.py): out of the queue and the open requests."""
        if r.state is S.QUEUED:
            try:
                self.waiting.remove(r)
            except ValueError:
                pass  # a refused request never entered the queue
        if self.decoding.pop(r.id, None) is not None:
            self.decoding_rows -= r.prompt.width

    def release(self, r: Request) -> bool:
        return False  # it holds nothing but its slot, which is the codec batcher's

    def open(self, r: Request, now: float) -> list[Event]:
        """A request whose LM runs in another engine; it waits (FIFO) for a codec slot."""
        if r.id in self._book.requests:
            raise ValueError(f"request id {r.id} is already in the engine")
        if self._slots.never_fits(r.state_bytes):
            return self._book.end(r, S.REJECTED, now,
                                  f"the request's codec state needs {r.state_bytes / 1e9:.2f} GB but this "
                                  f"codec engine's memory plan holds {self._slots.state_bytes / 1e9:.2f} GB "
                                  "for all requests; shorten the text, lower max_frames or free memory")
        self._book.open(r)
        if r.continuation:  # a later sentence: ahead of new requests for a slot, as in `Scheduler.add`
            queue_continuation(self.waiting, r)
        else:
            self.waiting.append(r)
        self.admit(now)
        return []

    def admit(self, now: float) -> None:
        """Give the queue's head codec slots while they are free (FIFO)."""
        slots = self._slots
        while self.waiting and slots.free:
            slot = slots.acquire(self.waiting[0].id, self.waiting[0].state_bytes)
            if slot is None:
                break  # its codec state waits (FIFO) for others' to be released
            r = self.waiting.popleft()
            r.slot = slot
            if self.bind is not None:
                try:
                    self.bind(r)
                except Exception as e:  # noqa: BLE001 - this request alone fails, never with wrong audio
                    self._unreported += self._book.end(r, S.FAILED, now, "internal error: its codec slot "
                                                       f"could not take the request's state: {describe(e)}")
                    continue
            r.state = S.DECODE  # "the LM is generating": its frames arrive in chunks
            r.timeline.admitted = now
            r.timeline.status = S.DECODE.value
            self.decoding[r.id] = r
            self.decoding_rows += r.prompt.width
            # a chunk 0 always holds a frame, so this only pends chunks (it never ends the request)
            self._ready(r, now)

    def take_unreported(self) -> list[Event]:
        """Events of requests ended inside `admit` (a codec slot that took no state)."""
        events, self._unreported = self._unreported, []
        return events

    def feed(self, r: Request, codes: np.ndarray, last: bool, now: float) -> list[Event]:
        """The next chunk's frames of `r` arrived (in order; `last`: the LM is done)."""
        if r.state.terminal:
            return []
        r.frames.extend(codes)  # (n_frames counts them: a remote request is never in a frame log)
        if last:
            r.frame_cap = r.n_frames  # the LM stopped here
        if r.state is S.QUEUED:
            return []  # buffered until a slot frees
        return self._ready(r, now)

    def chunk_delivered(self, r: Request, next_end: int, now: float) -> list[Event]:
        """A chunk of `r` was delivered (the codec batcher): its next one goes when its frames are here."""
        r.refresh_event()
        return self._codec.advance(r, now)

    def _ready(self, r: Request, now: float) -> list[Event]:
        if r.state is S.DECODE and r.n_frames >= r.frame_cap:
            self._lm_finished(r)
        if (r.n_frames >= r.next_end or r.state is S.DRAINING) and not r.chunk_inflight \
                and r.id not in self._codec.pending:
            return self._codec.advance(r, now)
        return []

    def _lm_finished(self, r: Request) -> None:
        """Its LM sent the last chunk: it drains through the codec."""
        r.drain()
        del self.decoding[r.id]
        self.decoding_rows -= r.prompt.width
