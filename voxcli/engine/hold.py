"""How long a chunk may wait on its way from an LM engine to a codec engine, so several share one message.

The rule a placement's relay applies (voxcli/cluster/relay.py, which says why chunks wait) and the
placement co-simulation predicts with (voxcli/sim/placement.py): plain logic on a `CodeChunk`.
"""

from __future__ import annotations

import time
from typing import Any

from voxcli.engine.roles import CodeChunk

# A middle chunk may wait in the LM replica's outbox for this long (at most) so that several share one
# codes link item (`chunk_hold_s`; measured in benchmarks/bench_relay_cost.py); 0: every chunk at once.
CHUNK_HOLD_S = 0.25
# ... but it leaves by its playback deadline less this: the codec's urgent margin (0.1 s), and what the
# LM's deadline may be later than the codec's while the request's first-audio time has not reached the
# LM (it places it at arrival + TTFA target, 0.2 s; the real first audio comes after at least a prefill
# and a chunk's decode steps, ~0.1 s on the sim's H100), and a decode and the hop. 0.5 s was measured
# too: at 1 req/s it stopped chunk 1's hold (3.05 chunks an item, not 3.9)
HOLD_LEAD_S = 0.3
# A request's first-audio time may wait as long in the codec replica's work outbox for the next request
# to share its item: until it arrives the LM replica places later deadlines after arrival + TTFA target,
# at most the target later than the codec's real first audio (LM lane ordering only: the codec replica
# keeps its own deadlines)
FIRST_AUDIO_HOLD_S = CHUNK_HOLD_S


def chunk_hold_s(chunk: CodeChunk | Any, max_hold_s: float, lead_s: float = HOLD_LEAD_S,
                 now_epoch: float | None = None) -> float:
    """How long a chunk may wait in its outbox for others to share its link item: chunk 0 not at all (the
    request's first audio waits on it), nor a request's bad end (`RoleEnd`, `Refused`); a later chunk up
    to `max_hold_s`, and never past its playback deadline less `lead_s` (what the codec engine needs
    ahead of a deadline: its urgent margin, a decode and the hop). A held last chunk keeps its request's
    codec slot that much longer: `max_hold_s` is small against a request's time in its slot."""
    if max_hold_s <= 0 or not isinstance(chunk, CodeChunk) or chunk.index == 0:
        return 0.0
    now = time.time() if now_epoch is None else now_epoch
    return max(0.0, min(max_hold_s, chunk.deadline_epoch - lead_s - now))
