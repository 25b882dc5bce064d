"""Most-slack routing for Ray Serve: each request goes to the replica whose engine can take the most more.

Every replica reports (`record_routing_stats`, every `STATS_PERIOD_S`) its slack: how many more streams
its device can decode within one audio frame's time (the engine's own latency estimator, see
`SpeechService.routing_stats`), less the requests already waiting. Between two reports the router
subtracts the requests it has sent to that replica since its last report, so a burst is spread instead of
all landing on the replica that looked best a moment ago. The replica with the most slack is tried first;
the rest follow as the fallback rank (Ray Serve's own queue-length check still applies within a rank).
A replica that has not reported yet counts as slack 0.

Ray Serve's request-router API is alpha (Ray >= 2.46); `ray_app.py` falls back to the default router
(power of two choices on queue length) when this module cannot be imported.
"""

from __future__ import annotations

import logging
from typing import Any

from ray.serve.request_router import PendingRequest, ReplicaID, RequestRouter, RunningReplica

STATS_PERIOD_S = 0.2
logger = logging.getLogger("ray.serve")


def slack_of(stats: dict[str, Any] | None, routed_since: int) -> float:
    if not stats:
        return -float(routed_since)
    return float(stats.get("slack", 0.0)) - routed_since


class MostSlackRouter(RequestRouter):
    def initialize_state(self, **kwargs: Any) -> None:
        self._routed: dict[Any, int] = {}  # replica id -> requests sent since its last stats report
        self._report: dict[Any, Any] = {}  # replica id -> the report's sequence number those count from
        logger.info("vox most-slack request router active")

    def _routed_since(self, replica: RunningReplica) -> int:
        stats = replica.routing_stats or {}
        seq = stats.get("seq")
        rid = replica.replica_id
        if self._report.get(rid) != seq:  # a fresh report already counts what was sent before it
            self._report[rid] = seq
            self._routed[rid] = 0
        return self._routed.get(rid, 0)

    async def choose_replicas(self, candidate_replicas: list[RunningReplica],
                              pending_request: PendingRequest | None = None) -> list[list[RunningReplica]]:
        if not candidate_replicas:
            return []
        ranked = sorted(candidate_replicas,
                        key=lambda r: slack_of(r.routing_stats, self._routed_since(r)), reverse=True)
        return [ranked[:1], ranked[1:]] if len(ranked) > 1 else [ranked]

    def on_request_routed(self, pending_request: PendingRequest, replica_id: ReplicaID, result: Any) -> None:
        self._routed[replica_id] = self._routed.get(replica_id, 0) + 1
