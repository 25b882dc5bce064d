"""The dispatchable chunks: at most one per request, ordered so that no decision sorts them all.

First chunks (always urgent, few) are kept in `firsts`; continuation chunks in `order`, a list of
(deadline, request id) kept sorted. A chunk's deadline is fixed once it is ready, so the chunks near
their deadline are a prefix of `order` (`urgent_prefix` bisects it: a codec that lags leaves hundreds
of chunks past their deadline, scanned on every decision otherwise).

This is also the public view of the pending chunks that admission policies read (engine/admission.py):
`first_count`, `order` and `by_request` are read-only outside the codec batcher. Its hot paths
keep aliases of the three containers and update them in place, so they are never rebound here.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from heapq import merge
from itertools import islice

from voxcli.engine.request import Chunk


class PendingChunks:
    __slots__ = ("by_request", "firsts", "order")

    def __init__(self) -> None:
        self.by_request: dict[int, Chunk] = {}  # request id -> its dispatchable chunk
        self.firsts: dict[int, Chunk] = {}  # the first chunks among them
        self.order: list[tuple[float, int]] = []  # (deadline, request id) of the others, sorted

    @property
    def first_count(self) -> int:
        return len(self.firsts)

    def add(self, ch: Chunk) -> None:
        rid = ch.request.id
        self.by_request[rid] = ch
        if ch.index == 0:
            self.firsts[rid] = ch
        else:
            insort(self.order, (ch.deadline, rid))

    def remove(self, ch: Chunk) -> None:
        rid = ch.request.id
        del self.by_request[rid]
        if ch.index == 0:
            del self.firsts[rid]
        else:
            del self.order[bisect_left(self.order, (ch.deadline, rid))]

    def remove_keys(self, keys: list[tuple[float, int]]) -> None:
        """Drop these `order` entries (in order; their chunks already left `by_request`): a launched
        batch is usually a run of `order`, taken out in one deletion."""
        order = self.order
        i = bisect_left(order, keys[0])
        if order[i:i + len(keys)] == keys:
            del order[i:i + len(keys)]
        else:
            for key in keys:
                del order[bisect_left(order, key)]

    def urgent_prefix(self, now: float, margin: float) -> int:
        """How many chunks at the front of `order` are within `margin` of their deadline."""
        order = self.order
        if not order or order[0][0] - now >= margin:
            return 0
        # deadline - now is monotone in the deadline, so the urgent ones are a prefix
        return bisect_left(order, True, key=lambda e: e[0] - now >= margin)

    def chunks(self, keys: list[tuple[float, int]]) -> list[Chunk]:
        """The chunks of these `order` entries."""
        by_request = self.by_request
        return [by_request[rid] for _, rid in keys]

    def sorted_firsts(self) -> list[Chunk]:
        return sorted(self.firsts.values(), key=chunk_order)

    def in_order(self, limit: int) -> list[Chunk]:
        """The first `limit` chunks of all, first chunks and continuations merged by deadline."""
        rest = self.chunks(self.order[:limit])
        if not self.firsts:
            return rest
        return list(islice(merge(self.sorted_firsts(), rest, key=chunk_order), limit))


def chunk_order(ch: Chunk) -> tuple[float, int]:
    """The one order of chunks in every decision: deadline, then request id (never object identity)."""
    return (ch.deadline, ch.request.id)
