"""/metrics per replica of a disaggregated placement: every replica's own counters and gauges on the front
door's /metrics, labelled `replica="vox-lm-0"` and `role="lm"`, beside the front door's summed gauges.

Each replica answers `metrics()` (one handle call) with a `ReplicaMetrics` dict: `gauges` (name -> value
now), `counters` (name -> total since it started) and `outcomes` (request status -> count, as its engine
ended them). The front door's poller thread gathers them every METRICS_PERIOD_S into a cache, so a scrape
(an async route) never blocks its event loop on a handle call; a replica that does not answer shows
`vox_replica_up 0` and no other series until it does. The counters restart at 0 when Ray Serve restarts a
replica, which Prometheus' rate() reads as a counter reset.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

METRICS_PERIOD_S = 1.0
_LABELS = ["replica", "role"]

# what each series means (a name not listed is a replica's own, documented where it is counted)
_HELP = {
    "queued_requests": "Requests waiting in the replica's engine (for admission, or for a codec slot).",
    "running_requests": "Requests the replica's engine holds past admission.",
    "kv_pages_used": "KV cache pages the replica holds.",
    "codec_slots_used": "Codec state slots the replica holds.",
    "relay_chunks": "Chunks this LM replica sent to codec replicas.",
    "relay_items": "Items this LM replica streamed to codec replicas (each carries every chunk ready then).",
    "relay_code_bytes": "Bytes of codes (and chunk 0's binding) this LM replica sent to codec replicas.",
    "audio_chunks": "Audio chunks this replica streamed to the front door.",
    "reaped": "Codec requests ended because nobody fed or read them within the idle timeout.",
}


def replica_metrics(gauges: dict[str, float], counters: dict[str, float],
                    outcomes: dict[str, int]) -> dict[str, Any]:
    """A replica's answer to `metrics()` (plain data: it crosses processes)."""
    return {"gauges": dict(gauges), "counters": dict(counters), "outcomes": dict(outcomes),
            "time": time.time()}


def gather(backends: list[Any], timeout_s: float) -> dict[str, dict[str, Any] | None]:
    """Every backend's `metrics()` (calls in parallel), None where it did not answer."""
    pending = [(b, b.handle.metrics.remote()) for b in backends]
    out: dict[str, dict[str, Any] | None] = {}
    for b, resp in pending:
        try:
            out[b.name] = resp.result(timeout_s=timeout_s)
        except Exception:  # noqa: BLE001 - a replica down (restarting): `up 0` says so
            out[b.name] = None
    return out


class ReplicaCollector(Collector):
    """The cached per-replica metrics as Prometheus families; `source()` -> [(name, role, metrics|None)]."""

    def __init__(self, source: Any) -> None:
        self.source = source

    def collect(self) -> Iterator[Any]:
        rows = list(self.source())
        up = GaugeMetricFamily("vox_replica_up", "1 if the replica answered its last metrics call.",
                               labels=_LABELS)
        requests = CounterMetricFamily("vox_replica_requests", "Requests the replica's engine ended, by "
                                       "outcome (done, failed, cancelled, rejected).",
                                       labels=[*_LABELS, "outcome"])
        families: dict[tuple[str, str], Any] = {}
        for name, role, m in rows:
            up.add_metric([name, role], 0.0 if m is None else 1.0)
            if m is None:
                continue
            for outcome, n in sorted(m["outcomes"].items()):
                requests.add_metric([name, role, outcome], float(n))
            for kind, make in (("gauges", GaugeMetricFamily), ("counters", CounterMetricFamily)):
                for key, value in m[kind].items():
                    fam = families.get((kind, key))
                    if fam is None:
                        fam = families[(kind, key)] = make(f"vox_replica_{key}", _HELP.get(key, key),
                                                           labels=_LABELS)
                    fam.add_metric([name, role], float(value))
        yield up
        yield requests
        yield from families.values()
