"""The codec-state slot table, as bookkeeping: a bounded set of slot ids, one per request that is
between its prefill and its last chunk. The device-side state behind a slot is the model program's
(`init_codec_slots`); a request's first chunk resets its slot, so a reused slot needs no clearing.

Some codecs keep per-request state that grows with the request (CosyVoice 3's DiT keys/values of every
Euler step: ~3.6 MB per mel frame at real size in fp32), so a slot count alone cannot bound their memory.
With a byte budget (`state_bytes`, the memory plan's), each slot is acquired together with its request's
worst-case state (`Prompt.codec_state_bytes`, for the request's frame cap) and gives it back on release:
a request whose state would not fit beside the others waits, and one that could never fit is refused by
the scheduler before it queues."""

from __future__ import annotations


class CodecSlotTable:
    def __init__(self, num_slots: int, state_bytes: int = 0) -> None:
        if num_slots < 1:
            raise ValueError("a codec slot table needs at least one slot")
        if state_bytes < 0:
            raise ValueError(f"the codec state budget must be >= 0 bytes, got {state_bytes}")
        self.num_slots = num_slots
        self.state_bytes = state_bytes  # 0: per-request state is not tracked
        self.state_used = 0
        self._free: list[int] = list(range(num_slots - 1, -1, -1))
        self._owner: dict[int, int] = {}
        self._held: dict[int, int] = {}  # slot -> state bytes reserved with it

    @property
    def free(self) -> int:
        return len(self._free)

    @property
    def used(self) -> int:
        return self.num_slots - len(self._free)

    @property
    def state_free(self) -> int | None:
        """Bytes of codec state still to reserve; None when the state is not tracked."""
        return self.state_bytes - self.state_used if self.state_bytes else None

    def never_fits(self, state: int) -> bool:
        """True when a request's state exceeds the whole budget (it would wait forever)."""
        return bool(self.state_bytes) and state > self.state_bytes

    def acquire(self, owner: int, state: int = 0) -> int | None:
        """A slot with `state` bytes reserved, or None when no slot (or not enough budget) is free."""
        if not self._free:
            return None
        if self.state_bytes and state > self.state_bytes - self.state_used:
            return None
        slot = self._free.pop()
        self._owner[slot] = owner
        if self.state_bytes:
            self._held[slot] = state
            self.state_used += state
        return slot

    def release(self, slot: int, owner: int) -> None:
        if self._owner.get(slot) != owner:
            raise RuntimeError(f"codec slot {slot} released by request {owner} "
                               f"but held by {self._owner.get(slot)}")
        del self._owner[slot]
        self.state_used -= self._held.pop(slot, 0)
        self._free.append(slot)
