"""Where the chunks a request's frames complete go: the seam between what makes frames and what takes
chunks (the scheduler's wiring, engine/scheduler.py).

A `ChunkSink` holds at most one dispatchable chunk per request (`pending`, read-only outside it), takes
one (`add`), and makes a request's next chunk dispatchable once it is ready (`advance`). Two sinks:
the codec batcher (codec_batcher.py), where chunks wait for a codec batch, and the hand-off sink
(handoff.py, an LM-only engine), where a chunk leaves the engine at once (`passes_on`).

A `FrameSource` is what feeds a codec batcher frames: the LM batcher (lm_batcher.py) or a remote frame
source (remote_source.py, a codec-only engine). The codec batcher asks it whether more frames will come
(`idle`) and tells it when a running request's chunk was delivered (`chunk_delivered`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from voxcli.engine.events import Event
from voxcli.engine.request import Chunk, Request, RequestState


class ChunkSink(Protocol):
    passes_on: bool  # a chunk leaves at once (hand-off): none ever waits in `pending`

    @property
    def pending(self) -> Mapping[int, Chunk]: ...
    def add(self, ch: Chunk) -> None: ...
    def advance(self, r: Request, now: float) -> list[Event]: ...


class FrameSource(Protocol):
    @property
    def idle(self) -> bool: ...
    def chunk_delivered(self, r: Request, next_end: int, now: float) -> list[Event]: ...


def ready_chunk(r: Request, now: float) -> Chunk | None:
    """The request's next chunk if it is ready to decode (made now), else None."""
    bounds = r.ready_chunk_bounds()
    if bounds is None:
        return None
    return r.chunk_to(bounds[1], bounds[2], now)


def produced_nothing(r: Request) -> bool:
    """The LM finished without a single frame: the request is done with no chunk at all."""
    return r.state is RequestState.DRAINING and r.next_chunk == 0
