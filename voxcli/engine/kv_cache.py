"""The paged KV-cache pool, as bookkeeping: which page ids are free and who holds which.

Policy: *reserve at admission*. A request is admitted only when the pool can give it every page it may
ever need (`model.kv_tokens(prompt)` positions, rounded up to pages), so a running request never waits
for memory mid-stream and nothing is ever preempted. The price is reserving for the worst case
(`max_frames`); pages come back the moment the LM finishes (before the codec drains the tail).

The device tensors behind the page ids are the model program's (`init_kv`)."""

from __future__ import annotations


class PoolExhausted(RuntimeError):
    pass


class KVPagePool:
    def __init__(self, num_pages: int, page_size: int) -> None:
        if num_pages < 1 or page_size < 1:
            raise ValueError("a KV pool needs at least one page of at least one position")
        self.num_pages = num_pages
        self.page_size = page_size
        # LIFO free list: deterministic, and recently freed (cache-warm) pages are reused first
        self._free: list[int] = list(range(num_pages - 1, -1, -1))
        self._owner: dict[int, int] = {}  # page -> request id (catches double frees)

    def pages_for(self, tokens: int) -> int:
        return max(1, -(-tokens // self.page_size))

    @property
    def free(self) -> int:
        return len(self._free)

    @property
    def used(self) -> int:
        return self.num_pages - len(self._free)

    def allocate(self, n: int, owner: int) -> list[int]:
        if n > len(self._free):
            raise PoolExhausted(f"request {owner} needs {n} KV pages, only {len(self._free)} free")
        pages = [self._free.pop() for _ in range(n)]
        for p in pages:
            self._owner[p] = owner
        return pages

    def release(self, pages: list[int], owner: int) -> None:
        for p in pages:
            if self._owner.get(p) != owner:
                raise RuntimeError(f"KV page {p} released by request {owner} "
                                   f"but held by {self._owner.get(p)}")
            del self._owner[p]
        self._free.extend(reversed(pages))
