"""EngineLoad: what an engine holds right now, as one typed read-only snapshot.

Everything outside the engine that reports or routes on load (the server's /health and /metrics, a Ray
replica's signals and metrics, the routing slack, the bench's late-chunk counters) reads this, never the
scheduler's parts: `Engine.load()` builds it from the parts' public counts. Read from another thread than
the engine's host loop it is approximate by nature (each number is read once, not under one lock).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

# The late-chunk counters (codec_batcher.py) an engine without a codec lane reports: none, ever.
NO_LATE_CHUNKS: Mapping[str, int] = MappingProxyType({"promoted": 0, "deadline_launches": 0, "slack_cuts": 0})


@dataclass(frozen=True)
class EngineLoad:
    open_requests: int = 0  # admitted and not ended (waiting included)
    waiting: int = 0  # queued for admission (an LM engine's prefill queue, a codec engine's slot queue)
    decoding: int = 0  # requests generating
    prefilling: int = 0  # requests in a prefill batch now
    kv_pages_used: int = 0
    codec_slots_used: int = 0
    # the late-chunk path's decisions so far (promoted, deadline_launches, slack_cuts): a copy
    late_chunks: Mapping[str, int] = field(default_factory=lambda: NO_LATE_CHUNKS)

    @property
    def running(self) -> int:
        """Open requests past admission."""
        return self.open_requests - self.waiting

    @property
    def held(self) -> int:
        """Streams held or promised: generating, prefilling or waiting (what the routing slack counts)."""
        return self.decoding + self.prefilling + self.waiting
