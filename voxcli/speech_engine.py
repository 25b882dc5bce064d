"""What a session needs of an engine: the typed face of `Engine` that every speaking front end sees.

`voxcli.engine.engine.Engine` (and its role engines), the Ray front door's `PlacementEngine` and the
replicas' `ReplicaEngine` all satisfy `SpeechEngine`; `voxcli.session.Session.engine` is one. Kept apart
from session.py so that module and the speaking loops can share these types without importing each other.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

    from voxcli.engine.load import EngineLoad
    from voxcli.models.base import ModelProgram, SynthesisRequest
    from voxcli.models.text_feed import TextFeed


class SpeechChunk(Protocol):
    pcm: np.ndarray  # mono float32


class SpeechStream(Protocol):
    """One request's audio, chunk by chunk as the engine delivers it."""

    def __iter__(self) -> Iterator[SpeechChunk]: ...

    def cancel(self) -> None: ...

    def keep_audio(self, keep: bool) -> None:
        """`False`: forget each chunk once iterated (a server streams it on and never waits for the whole)."""
        ...


class SpeechEngine(Protocol):
    # The model program when it runs in this process (its text events, its option schema); None on a
    # Ray front, whose model lives in the replicas.
    program: ModelProgram | None
    # Whether `submit` takes `text_feed=` (a text still arriving, for a model whose spec streams_text):
    # the both-role Engine does; role engines and Ray fronts take one request per sentence instead.
    takes_text_feed: bool

    def submit(self, request: SynthesisRequest, *, continues: SpeechStream | None = None) -> SpeechStream:
        """Queue `request`; `continues`: the stream of the previous sentence of the same utterance (never
        refused for load). Raises the model's InputError, or the engine's refusal."""
        ...

    def close(self) -> None: ...


class FeedingEngine(SpeechEngine, Protocol):
    """A `SpeechEngine` whose `takes_text_feed` is True."""

    def submit(self, request: SynthesisRequest, *, continues: SpeechStream | None = None,  # type: ignore[override]
               text_feed: TextFeed | None = None) -> SpeechStream: ...


class ServedEngine(SpeechEngine, Protocol):
    """A `SpeechEngine` a server reports on (/health, /metrics): the Engine, the Ray front door."""

    @property
    def dead(self) -> str | None:
        """Why the engine stopped serving on its own (its host loop failed); None while it serves."""
        ...

    def load(self) -> EngineLoad:
        """What it holds now (voxcli/engine/load.py)."""
        ...
