"""Prometheus metrics, on a registry of the app's own (two apps in one process never share counters).

TTFA and stall are measured where the server sees them: from the request's arrival at the route to its
first audio chunk, and the playback stall a client that starts playing at the first chunk would hear
(the total time, per request, that the audio received so far had run out before the next chunk came).
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_TTFA_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0)
_STALL_BUCKETS = (0.0, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0)


class ServerMetrics:
    def __init__(self, service: Any) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("vox_requests", "Speech requests by outcome (done: streamed and read by "
                                "the client; stopped_reading: generated, but the client stopped reading; "
                                "cancelled: the client left; failed, rejected, invalid).", ["outcome"],
                                registry=r)
        self.rejections = Counter("vox_rejections", "Requests refused, by reason.", ["reason"], registry=r)
        self.ttfa = Histogram("vox_ttfa_seconds", "Time from request arrival to its first audio.",
                              buckets=_TTFA_BUCKETS, registry=r)
        self.stall = Histogram("vox_stall_seconds", "Playback stall per request (a player starting at "
                               "the first chunk).", buckets=_STALL_BUCKETS, registry=r)
        self.audio = Counter("vox_audio_seconds", "Audio seconds streamed.", registry=r)
        gauges = (("vox_active_requests", "Requests being served (between arrival and end).",
                   lambda: service.active),
                  ("vox_queued_requests", "Requests waiting for admission in the engine.", service.queued),
                  ("vox_kv_pages_used", "KV cache pages held.", service.kv_pages_used),
                  ("vox_codec_slots_used", "Codec state slots held.", service.codec_slots_used))
        for name, doc, fn in gauges:
            Gauge(name, doc, registry=r).set_function(fn)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def reject(self, reason: str) -> None:
        self.rejections.labels(reason=reason).inc()
        self.requests.labels(outcome="rejected").inc()


class PlaybackClock:
    """TTFA and stall of one request as the server delivers it."""

    def __init__(self, sample_rate: int, arrived: float | None = None) -> None:
        self.sample_rate = sample_rate
        self.arrived = arrived if arrived is not None else time.perf_counter()
        self.first: float | None = None
        self.played_until = 0.0  # wall time at which the audio delivered so far runs out
        self.stall_s = 0.0
        self.audio_s = 0.0

    def chunk(self, samples: int, t: float | None = None) -> None:
        t = time.perf_counter() if t is None else t
        dur = samples / self.sample_rate
        if self.first is None:
            self.first = t
            self.played_until = t
        if t > self.played_until:
            self.stall_s += t - self.played_until
            self.played_until = t
        self.played_until += dur
        self.audio_s += dur

    @property
    def ttfa(self) -> float | None:
        return None if self.first is None else self.first - self.arrived
