"""The codec-state slot table, as bookkeeping: a bounded set of slot ids, one per request that is
between its prefill and its last chunk. The device-side state behind a slot is the model program's
(`init_codec_slots`); a request's first chunk resets its slot, so a reused slot needs no clearing."""

from __future__ import annotations


class CodecSlotTable:
    def __init__(self, num_slots: int) -> None:
        if num_slots < 1:
            raise ValueError("a codec slot table needs at least one slot")
        self.num_slots = num_slots
        self._free: list[int] = list(range(num_slots - 1, -1, -1))
        self._owner: dict[int, int] = {}

    @property
    def free(self) -> int:
        return len(self._free)

    @property
    def used(self) -> int:
        return self.num_slots - len(self._free)

    def owner(self, slot: int) -> int | None:
        return self._owner.get(slot)

    def acquire(self, owner: int) -> int | None:
        if not self._free:
            return None
        slot = self._free.pop()
        self._owner[slot] = owner
        return slot

    def release(self, slot: int, owner: int) -> None:
        if self._owner.get(slot) != owner:
            raise RuntimeError(f"codec slot {slot} released by request {owner} "
                               f"but held by {self._owner.get(slot)}")
        del self._owner[slot]
        self._free.append(slot)
