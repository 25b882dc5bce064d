"""`--show-text` for many requests at once (`vox batch`, `vox serve`): a unified text+audio model's text
phase, routed to the request that wrote it.

Such a program (models/speechlm) calls `program.on_text(request key, text)` on the engine thread as each
text segment ends, with `SynthesisRequest.request_id` as the key. A segment written before the audio is
therefore recorded before that request's first audio chunk leaves the engine (the chunk is decoded
after the step that ended the segment), so a caller holding its first chunk already sees that text.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import Any

from voxcli.models.base import SynthesisRequest


class NoTextPhase(Exception):
    """The model writes no text phase; the message names it (the caller says which flag or field)."""


class TextTap:
    """One per engine: installs itself as the program's `on_text` and keeps each followed request's text
    segments until the caller takes them (text of requests nobody follows is dropped)."""

    def __init__(self, program: Any, model: str) -> None:
        if not hasattr(program, "on_text"):
            raise NoTextPhase(f"model {model} writes no text phase (a unified text+audio model such as "
                              "Bagpiper does)")
        self._lock = threading.Lock()
        self._texts: dict[str, list[str]] = {}
        self._ids = itertools.count()
        program.on_text = self._on_text

    def _on_text(self, key: str | None, text: str) -> None:
        with self._lock:
            if key in self._texts:
                self._texts[key].append(text)

    def follow(self, requests: Sequence[SynthesisRequest]) -> list[str]:
        """Give each request a fresh key (its request_id) and start keeping its text; returns the keys."""
        keys = []
        with self._lock:
            for r in requests:
                key = f"vox-text-{next(self._ids)}"
                r.request_id = key
                self._texts[key] = []
                keys.append(key)
        return keys

    def text(self, keys: Sequence[str]) -> list[str]:
        """The segments written so far by these requests, in order (requests in order, then segments)."""
        with self._lock:
            return [t for k in keys for t in self._texts.get(k, ())]

    def forget(self, keys: Sequence[str]) -> None:
        with self._lock:
            for k in keys:
                self._texts.pop(k, None)


class Followed:
    """The text of one caller's requests, read as it grows (`new()`: the segments not read yet)."""

    def __init__(self, tap: TextTap, requests: Sequence[SynthesisRequest]) -> None:
        self._tap = tap
        self._keys = tap.follow(requests)
        self._read = 0

    def all(self) -> list[str]:
        return self._tap.text(self._keys)

    def new(self) -> list[str]:
        texts = self.all()
        fresh, self._read = texts[self._read:], len(texts)
        return fresh

    def close(self) -> None:
        self._tap.forget(self._keys)
