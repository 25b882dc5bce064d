"""`--show-text` / `show_text`: the text a unified text+audio model writes, routed to the utterance that
asked for it.

Such a program (models/speechlm) emits `text_written` (models/base.py's TextEvents) on the engine thread
as each text segment ends, keyed by `SynthesisRequest.request_id`. A segment written before the audio
is therefore handed over before that request's first audio chunk leaves the engine (the chunk is
decoded after the step that ended the segment), so a caller holding its first chunk already has that
text. One `TextRouter` per session listens once; each `Session.speak` that wants the text follows its
own requests under fresh keys.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable

from voxcli.models.base import TextEvents, TextWritten


class NoTextPhase(Exception):
    """The model writes no text phase; the message names it (the caller says which flag or field)."""


def no_text_phase(model: str) -> NoTextPhase:
    return NoTextPhase(f"model {model} writes no text phase (a unified text+audio model such as Bagpiper "
                       "does)")


class TextRouter:
    """Listens to one program's text events and hands each segment to the caller following its request
    (text of requests nobody follows is dropped)."""

    def __init__(self, events: TextEvents) -> None:
        self._lock = threading.Lock()
        self._callers: dict[str, Callable[[str], None]] = {}
        self._ids = itertools.count()
        events.listen(self._written)

    def follow(self, on_text: Callable[[str], None]) -> str:
        """A fresh request key whose text goes to `on_text`; give it to the request as its request_id."""
        key = f"vox-text-{next(self._ids)}"
        with self._lock:
            self._callers[key] = on_text
        return key

    def forget(self, key: str) -> None:
        with self._lock:
            self._callers.pop(key, None)

    def _written(self, event: TextWritten) -> None:
        with self._lock:
            caller = self._callers.get(event.request_id or "")
        if caller is not None:
            caller(event.text)


class TextLog:
    """The text of one utterance as it grows, read from another thread (the server's response)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._texts: list[str] = []
        self._read = 0

    def add(self, text: str) -> None:
        with self._lock:
            self._texts.append(text)

    def all(self) -> list[str]:
        with self._lock:
            return list(self._texts)

    def new(self) -> list[str]:
        """The segments not read by `new` before (an event stream sends each once)."""
        with self._lock:
            fresh, self._read = self._texts[self._read:], len(self._texts)
            return fresh
