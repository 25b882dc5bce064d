"""Recording what a scheduler decides: every batch the engine launches, as it is decided, through the
executor's public `launch` (the seam every scheduler version goes through). The decision-digest test
hashes these records; the hot-path test compares them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def record_batches(eng: Any, sink: Callable[[tuple], None]) -> None:
    """Hand `sink` every batch the engine launches, as it is decided: (time, lane, stage, bucket, rows),
    rows being (request, chunk index, start, end, last) for a codec batch and (request, pages, slot) for
    an LM batch. Wraps the executor's public `launch`: the seam every scheduler version goes through."""
    launch = eng.executor.launch

    def record(work: Any) -> Any:
        if work.stage == "codec":
            rows = [(ch.request.id, ch.index, ch.start, ch.end, ch.last) for ch in work.tag]
        else:
            rows = [(row.request_id, tuple(row.pages), row.slot) for row in work.rows]
        sink((work.decided_at, work.lane, work.stage, work.bucket, rows))
        return launch(work)

    eng.executor.launch = record
