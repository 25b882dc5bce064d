"""The hand-off sink: an LM-only engine's chunks leave it the moment they are ready (engine/roles.py).

Wired behind the LM batcher in place of a codec batcher (engine/scheduler.py): each ready chunk becomes
a `HandedOff` event with its codes (the LM engine sends them on as a `CodeChunk`), and the request's next
chunk may go at once; a request whose last chunk left is done here (its codec engine delivers the audio).
"""

from __future__ import annotations

import numpy as np

from voxcli.engine.chunk_sink import produced_nothing, ready_chunk
from voxcli.engine.events import Event, HandedOff
from voxcli.engine.frame_log import settle
from voxcli.engine.request import Chunk, Request, RequestState
from voxcli.engine.request_book import RequestBook


class HandOffSink:
    passes_on = True

    def __init__(self, book: RequestBook, codebooks: int) -> None:
        self._book = book
        self._empty = np.zeros((0, codebooks), dtype=np.int64)
        self._pending: dict[int, Chunk] = {}  # never holds a chunk: each one leaves at once

    @property
    def pending(self) -> dict[int, Chunk]:
        return self._pending

    def add(self, ch: Chunk) -> None:
        raise RuntimeError("a hand-off sink holds no chunk: each one leaves when it is ready (advance)")

    def advance(self, r: Request, now: float) -> list[Event]:
        """Hand off every ready chunk of `r`, in order; a request with no frame at all is done."""
        events: list[Event] = []
        while True:
            ch = ready_chunk(r, now)
            if ch is None:
                if produced_nothing(r):
                    events += self._book.end(r, RequestState.DONE, now, None)
                return events
            if len(r.frames) < ch.end:  # its frames are still in the frame log (frame_log.py)
                settle(r)
            codes = np.array(r.frames[ch.start:ch.end]) if ch.end > ch.start else self._empty
            events.append(HandedOff(r, ch, codes, now))
            r.chunk_left(ch)
            if ch.last:
                return events + self._book.end(r, RequestState.DONE, now, None)
            r.refresh_event()
