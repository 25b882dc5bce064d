"""Retry-After when the admission gives none: the time the requests the server holds still need.

A refused request may come back once enough of the held ones have ended to make room for the ones
waiting ahead of it and itself. Each running request needs about the mean time a finished request
took (arrival to end, queueing included) less what it has already had; the `waiting + 1`-th slot to
free is when the refused one could start.

Only completions teach the mean: a refused request never ran, and its ~0 s would drag the mean (and
Retry-After) down to nothing after a run of refusals. Only requests the engine runs (they produced
audio) are held: an arrival still waiting for its admission decision is not (counting each arrival as
active made the server look as if it finished requests faster the more it refused).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Hashable


class RetryEstimator:
    def __init__(self, keep: int = 64, clock: Callable[[], float] = time.perf_counter) -> None:
        self._durations: deque[float] = deque(maxlen=keep)
        self._running: dict[Hashable, float] = {}  # a held request -> its arrival time
        self._clock = clock
        self._lock = threading.Lock()

    def running(self, key: Hashable, arrived: float) -> None:
        """The request `key` (arrived at `arrived` on this clock) is running in the engine."""
        with self._lock:
            self._running[key] = arrived

    def ended(self, key: Hashable, arrived: float, completed: bool) -> None:
        """It ended; `completed`: it spoke all its text (a refusal, a failure or a cancel teaches nothing
        about how long a request takes)."""
        with self._lock:
            self._running.pop(key, None)
            if completed:
                self._durations.append(max(0.0, self._clock() - arrived))

    def mean_duration(self) -> float | None:
        with self._lock:
            return sum(self._durations) / len(self._durations) if self._durations else None

    def seconds(self, waiting: int) -> float | None:
        """When the `waiting + 1`-th slot frees (None before anything has completed, or when nothing
        is held: no basis for an estimate)."""
        with self._lock:
            if not self._durations or not self._running:
                return None
            mean = sum(self._durations) / len(self._durations)
            now = self._clock()
            left = sorted(max(0.0, mean - (now - arrived)) for arrived in self._running.values())
        rounds, slot = divmod(waiting, len(left))  # each freed slot runs one more request of `mean`
        return left[slot] + rounds * mean
