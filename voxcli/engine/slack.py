"""An engine's routing signal for a scale-out's front door: how many more streams it can take.

`decode_slack` = how many streams this engine's device can decode within `utilization` of one audio
frame's time (its latency estimator's decode-step cost; the rest of the frame is for prefills and the
codec), less the streams it holds or has waiting. A both or LM-only replica reports it (the server's
`routing_stats`, voxcli/server/service.py); the placement co-simulation reads it the same way
(voxcli/sim/placement.py), so predicted and served routing agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from voxcli.engine.engine import Engine


def decode_slack(engine: Engine, utilization: float = 0.6) -> dict[str, float]:
    budget = engine.spec.frame_seconds * utilization
    lo, hi = 0, engine.config.max_running  # largest n with decode_step(n) <= budget (monotonic in n)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if engine.estimator.decode_step(mid) <= budget:
            lo = mid
        else:
            hi = mid - 1
    held = engine.load().held
    return {"slack": float(lo - held), "held": float(held), "capacity": float(lo)}
