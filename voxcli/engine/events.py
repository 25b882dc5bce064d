"""What the scheduler reports back: every scheduler method returns what happened as events.

The scheduler never calls the model or the user; the engine feeds its audio streams (and a role engine
its hand-offs) from these. They are plain records: the request they concern, the chunk and its data
where there is one, and the time on the engine clock.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from voxcli.engine.request import Chunk, Request


@dataclass(slots=True)
class Delivered:
    """A chunk's PCM is ready for the user."""

    request: Request
    chunk: Chunk
    pcm: np.ndarray
    t: float


@dataclass(slots=True)
class HandedOff:
    """A chunk's codes leave the engine (role lm: its lane plan has no codec lane; engine/roles.py)."""

    request: Request
    chunk: Chunk
    codes: np.ndarray
    t: float


@dataclass(slots=True)
class Ended:
    """A request reached a terminal state (done, failed, cancelled, rejected); see request.state/reason."""

    request: Request
    t: float


@dataclass(slots=True)
class Released:
    """A request's pages and slot went back to the pools (the program may drop its per-row state)."""

    request: Request


Event = Delivered | Ended | Released | HandedOff
