"""The text of a request that is still arriving (a pipe, a WebSocket, an LLM's tokens): fragments in, whole
words out, and a `close()` when the text is complete.

A family that reads text as it arrives (Kyutai's delayed streams: `ModelSpec.streams_text`) takes one in
`prepare(request, feed=...)` and reads `snapshot(n)` at every step: the words after the first n, and
whether the text is complete, read together under the lock (a word and the close landing between two
reads would otherwise let a step see the text closed without its last word). A fragment may end inside a
word ("Hel" + "lo "): a word is whole once whitespace follows it, or at `close()`.

The engine binds the feed to its clock (`bind`): the first word's arrival starts the request (its TTFA
counts from there, not from submit), and a feed that has had no text for `idle_limit_s` while still open
is `stale` (the program fails that row alone, so a client that never finishes holds no pages forever).
Imports nothing from voxcli.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

DEFAULT_IDLE_LIMIT_S = 60.0  # no text for this long while the text is open: the request ends


class FeedClosed(ValueError):
    """Text was added after `close()`."""


class TextFeed:
    def __init__(self, idle_limit_s: float = DEFAULT_IDLE_LIMIT_S) -> None:
        if not idle_limit_s > 0:
            raise ValueError(f"idle_limit_s must be > 0, got {idle_limit_s}")
        self.idle_limit_s = float(idle_limit_s)
        self._lock = threading.Lock()
        self._words: list[str] = []
        self._tail = ""  # the part of the last fragment that may still grow into a longer word
        self._closed = False
        self._clock: Callable[[], float] = time.monotonic
        self._last_text = self._clock()
        self._on_start: Callable[[], None] | None = None
        self._started = False

    # --- the writer's side -----------------------------------------------------------------------
    def add(self, fragment: str) -> None:
        """Append text as it arrived (any cut: inside a word, several words, whitespace only)."""
        with self._lock:
            if self._closed:
                raise FeedClosed("the text of this request is already complete")
            self._last_text = self._clock()
            text = self._tail + fragment
            parts = text.split()
            if parts and not text[-1].isspace():
                self._tail = parts.pop()
            else:
                self._tail = ""
            self._words.extend(parts)
            start = self._start_if_ready()
        if start is not None:
            start()

    def close(self) -> None:
        """No more text: the last fragment's unfinished word is a word now."""
        with self._lock:
            if self._closed:
                return
            if self._tail:
                self._words.append(self._tail)
                self._tail = ""
            self._closed = True
            start = self._start_if_ready()
        if start is not None:
            start()

    # --- the engine's and the program's side ------------------------------------------------------
    def bind(self, clock: Callable[[], float], on_start: Callable[[], None]) -> bool:
        """Measure time on `clock` (the engine's) from now on; `on_start()` runs once, on the writer's
        thread, when the first word arrives or the text closes (with no words) — unless that already
        happened: then it does not run and this returns True."""
        with self._lock:
            self._clock = clock
            self._last_text = clock()
            if self._words or self._closed:
                self._started = True
                return True
            self._on_start = on_start
            return False

    def _start_if_ready(self) -> Callable[[], None] | None:
        if self._started or not (self._words or self._closed):
            return None
        self._started = True
        start, self._on_start = self._on_start, None
        return start

    def snapshot(self, start: int = 0) -> tuple[list[str], bool]:
        """(the whole words after the first `start`, whether the text is complete and they are all)."""
        with self._lock:
            return self._words[start:], self._closed

    @property
    def has_words(self) -> bool:
        with self._lock:
            return bool(self._words)

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._closed

    @property
    def words(self) -> list[str]:
        with self._lock:
            return list(self._words)

    def stale(self) -> str | None:
        """Why the request should end (one sentence) when the text is open and has had no text for
        `idle_limit_s` on the bound clock; None otherwise."""
        with self._lock:
            if self._closed:
                return None
            idle = self._clock() - self._last_text
        if idle <= self.idle_limit_s:
            return None
        return (f"no text arrived for {idle:.1f} s (the limit is {self.idle_limit_s:g} s) and the text was "
                f"never ended; send the next words sooner, or end the text")
