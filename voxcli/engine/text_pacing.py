"""Rows whose text is still arriving (a text feed, models/text_feed.py): how far ahead of playback they run.

Such a row never waits for a word inside a step: the model pads while the next word has not arrived
(Kyutai's state machine), so it keeps producing audio. Run at the device's speed, a row that waits for a
typist would pad minutes of silence ahead of its listener (and reach its frame cap) before the next word
lands. The policy here: a running row whose text is still open sits out decode steps while its audio is
more than LEAD_S ahead of its playback (its LM slack, Request.slack_key, above LEAD_S); it rejoins when its
slack falls to LEAD_S (a timer) or when its text is complete. Its neighbours' steps go on without it (the
decode step's capped path, lm_batcher.py), and a step of none is no step: nothing stalls. A row whose text
is complete runs as any other row.
"""

from __future__ import annotations

from collections.abc import Mapping

from voxcli.engine.request import Request, RequestState

LEAD_S = 0.5  # seconds of audio a row whose text is open may run ahead of its playback


def _open(r: Request) -> bool:
    feed = r.text_feed
    return feed is not None and not feed.closed and r.state is RequestState.DECODE


def paced(fed: Mapping[int, Request], ks: float, kc: float, now: float) -> set[int]:
    """The running rows of `fed` (the fed requests, by id) that sit out the next decode step (ids);
    `ks`, `kc`: the LM batcher's slack keys (a decode step, a one-chunk codec call)."""
    return {rid for rid, r in fed.items() if _open(r) and r.slack_key(ks, kc) - now > LEAD_S}


def wake_times(fed: Mapping[int, Request], ks: float, kc: float) -> list[float]:
    """When each sitting-out row's slack falls to LEAD_S (a timer: it runs again then)."""
    return [r.slack_key(ks, kc) - LEAD_S for r in fed.values() if _open(r)]
