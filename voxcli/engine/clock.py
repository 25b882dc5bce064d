"""Clocks. The scheduler never reads a clock itself: the engine passes `now` from its executor's
clock, so the same decisions follow from the same times (virtual time lives in the sim executor)."""

from __future__ import annotations

import time


class WallClock:
    """Monotonic seconds since construction (real-clock executors)."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self._t0
