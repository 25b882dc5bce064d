"""Sentence chaining on the engine side: a later sentence of a user request already admitted.

voxcli/speak.py cuts a user request into sentences and submits each with the stream of the one before
(`Engine.submit(continues=...)`); a placement's front door gives the earlier audio's end directly
(`playback_from`, engine/roles.py). Everything the engine does about it is here:

- `playback_end`: when the audio delivered so far for the user request stops playing. That is the
  continuation's first-chunk deadline, so its TTFA target counts from its arrival to then.
- `chain`: mark the request a continuation with that deadline. Admission decides once per user request,
  so a continuation is never refused for load (queue full, predicted TTFA).
- `queue_continuation`: into the queue behind the continuations already waiting, ahead of every new
  request: what was accepted finishes before anything new starts.
"""

from __future__ import annotations

from collections import deque

from voxcli.engine.request import Request
from voxcli.engine.stream import AudioStream


def playback_end(stream: AudioStream, now: float) -> float:
    """When the audio `stream` has delivered so far stops playing (engine clock), for a listener who
    starts each sentence when its first audio arrives or when the previous sentence ends, whichever is
    later (`playback_from`, set when the stream was submitted as a continuation)."""
    tl = stream.timeline
    start = tl.first_audio if tl.first_audio is not None else now
    if stream.playback_from is not None:
        start = max(start, stream.playback_from)
    return start + tl.audio_s


def chain(r: Request, stream: AudioStream, continues: AudioStream | None,
          playback_from: float | None) -> None:
    """Make `r` (submitted, not yet added) the next sentence after `continues` (its stream), or after
    earlier audio that plays until `playback_from`; neither given: `r` starts a user request."""
    if continues is not None:
        playback_from = playback_end(continues, r.arrival)
    if playback_from is not None:
        stream.playback_from = playback_from
        continue_after(r, playback_from)


def continue_after(r: Request, playback_end: float) -> None:
    """Mark `r` as a continuation whose first chunk is due when the earlier audio ends (`playback_end`):
    its TTFA target, from its arrival."""
    r.continuation = True
    r.ttfa_target = max(0.0, playback_end - r.arrival)


def queue_continuation(waiting: deque[Request], r: Request) -> None:
    """Insert `r` behind the continuations at the head of `waiting` (the queue's head is only ever
    popped in order, so they are always a prefix)."""
    i = 0
    for q in waiting:
        if not q.continuation:
            break
        i += 1
    waiting.insert(i, r)
