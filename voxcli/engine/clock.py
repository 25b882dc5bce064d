"""Clocks. The scheduler never reads a clock itself: the engine passes `now` from its executor's
clock, so the same decisions follow from the same times (tests drive a ManualClock)."""

from __future__ import annotations

import time


class WallClock:
    """Monotonic seconds since construction (real-clock executors)."""

    def __init__(self) -> None:
        self._t0 = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self._t0


class ManualClock:
    """A clock that only moves when told to (virtual time: the sim device and scheduler tests)."""

    def __init__(self, start: float = 0.0) -> None:
        self._t = start

    def now(self) -> float:
        return self._t

    def advance_to(self, t: float) -> None:
        if t < self._t:
            raise ValueError(f"a clock cannot go back in time (now {self._t}, asked {t})")
        self._t = t

    def advance(self, dt: float) -> None:
        self.advance_to(self._t + dt)
