"""The LM -> codec relay between role replicas: ONE long-lived streaming call per LM -> codec pair.

Why a stream. A Ray Serve handle call pays the whole request path every time (the caller's router and
its replica choice, the callee's queue and an asyncio task, a reply object, Serve's request metrics):
about 5 ms of host CPU across the processes, so a relay of one call per batch of chunks plus its
acknowledgement cost 2.7 calls per chunk. Items of a streaming call pay none of it: each is one object
the callee's core worker reports to the caller as the generator yields it, in order. So the codec
replica opens one streaming call to each LM replica it takes chunks from (`LMReplica.codes_for`, opened
on its first request from that LM and kept), and the LM replica yields, whenever chunks are ready, every
chunk waiting for that codec replica as one item: at light load a chunk an item at once, under load many.

Why not Ray Compiled Graphs' channels: a compiled graph is a static DAG of plain actors, executed as a
whole per input; a relay whose requests start, stream a varying number of chunks and end independently,
between Serve replicas that Serve restarts and places, fits neither the static graph nor its actors (a
failed actor tears the graph down), and its shared-memory channels are per node. The streaming call keeps
Serve's placement, health checks and restarts, and crosses nodes as any call does.

Failures. The codec replica's link to a dead LM replica ends with an error: every request it holds from
that LM fails with one sentence naming the LM replica, and the next request from it reopens the link (a
restarted LM replica). A dead codec replica stops pulling: its requests' LM calls are cancelled by the
front door (their chunks are dropped from the outbox), and chunks nobody pulls for STALE_S are dropped.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from voxcli.engine.roles import CodeChunk

RELAY_KEEP = 100_000
STALE_S = 60.0  # chunks waiting this long with no codec replica pulling them are dropped


class CodeOutbox:
    """An LM replica's chunks waiting for one codec replica's link (all on the replica's event loop)."""

    def __init__(self) -> None:
        self.items: list[CodeChunk] = []
        self.wake = asyncio.Event()
        self.consumer = 0  # the live `codes_for` call's token (a newer call supersedes an older one)
        self._tokens = 0
        self.idle_since: float | None = time.monotonic()  # no consumer since then

    def put(self, item: CodeChunk) -> None:
        if self.idle_since is not None and time.monotonic() - self.idle_since > STALE_S:
            self.items.clear()  # nobody pulled for a long time: the codec replica is gone
        self.items.append(item)
        self.wake.set()

    def drop(self, key: str) -> None:
        """A request that ended here early (cancelled, failed): its chunks not sent yet go nowhere."""
        self.items = [c for c in self.items if c.key != key]

    def attach(self) -> int:
        self._tokens += 1
        self.consumer = self._tokens
        self.idle_since = None
        self.wake.set()  # an older call waiting wakes, sees it is superseded, and ends
        return self.consumer

    def detach(self, token: int) -> None:
        if self.consumer == token:
            self.consumer = 0
            self.idle_since = time.monotonic()


async def serve_codes(box: CodeOutbox, stats: RelayStats) -> AsyncIterator[list[CodeChunk]]:
    """The LM side of a link: every chunk waiting in `box`, one item per wake, until superseded or
    cancelled (the codec replica went away)."""
    me = box.attach()
    try:
        while box.consumer == me:
            if not box.items:
                box.wake.clear()
                await box.wake.wait()
                continue
            batch, box.items = box.items, []
            stats.sent(batch)
            yield batch
    finally:
        box.detach(me)


@dataclass
class RelayStats:
    """What crossed between replicas for split requests: the LM side counts chunks, link items and code
    bytes; the codec side the hop latency of every chunk it took (chunk left the LM engine -> taken from
    the link by the codec replica)."""

    chunks: int = 0
    items: int = 0  # LM -> codec stream items (each carries every chunk ready then)
    code_bytes: int = 0  # the codes' own bytes and chunk 0's binding (pickling adds ~0.3 kB per chunk)
    lm_to_codec_s: deque[float] = field(default_factory=lambda: deque(maxlen=RELAY_KEEP))

    def sent(self, batch: list[CodeChunk]) -> None:
        self.items += 1
        self.chunks += len(batch)
        self.code_bytes += sum(c.nbytes for c in batch)

    def took(self, item: CodeChunk, now: float) -> None:
        self.lm_to_codec_s.append(now - item.sent_epoch)

    def raw(self) -> dict[str, Any]:
        return {"chunks": self.chunks, "items": self.items, "code_bytes": self.code_bytes,
                "hops": list(self.lm_to_codec_s)}

    @classmethod
    def merged(cls, parts: list[dict[str, Any]]) -> RelayStats:
        out = cls()
        for p in parts:
            out.chunks += p["chunks"]
            out.items += p["items"]
            out.code_bytes += p["code_bytes"]
            out.lm_to_codec_s.extend(p["hops"])
        return out

    def per_chunk(self) -> dict[str, float]:
        """Per chunk: Ray messages (a link item LM -> codec for every `chunks_per_item` chunks, and the
        PCM codec -> front door, one per chunk), code bytes, and the hop's latency percentiles."""
        n = max(1, self.chunks)
        hops = sorted(self.lm_to_codec_s)

        def pct(q: float) -> float:
            return 1e3 * hops[min(len(hops) - 1, int(len(hops) * q))] if hops else 0.0

        return {"chunks": float(self.chunks), "messages_per_chunk": (self.items + self.chunks) / n,
                "chunks_per_item": self.chunks / max(1, self.items),
                "code_bytes_per_chunk": self.code_bytes / n,
                "hop_ms_p50": pct(0.5), "hop_ms_p90": pct(0.9), "hop_ms_p99": pct(0.99)}


class CodeLink:
    """The codec side of a link to one LM replica: pulls its stream and hands every chunk to `take`; when
    the stream breaks, `lost(reason)` ends what came from that LM."""

    def __init__(self, lm_name: str, codec_name: str, take: Any, lost: Any) -> None:
        self.lm_name = lm_name
        self.task = asyncio.create_task(self._pull(codec_name, take, lost))

    async def _pull(self, codec_name: str, take: Any, lost: Any) -> None:
        from ray import serve

        from voxcli.cluster.ray_errors import ray_reason

        handle = serve.get_deployment_handle(self.lm_name, app_name=self.lm_name)
        try:
            async for batch in handle.options(method_name="codes_for", stream=True).remote(codec_name):
                now = time.time()
                for chunk in batch:
                    take(chunk, now)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - the LM replica died (or restarted): its requests fail here
            lost(f"the LM replica {self.lm_name} failed mid-stream ({ray_reason(e)})")
            return
        lost(f"the LM replica {self.lm_name} closed its link")

    @property
    def alive(self) -> bool:
        return not self.task.done()
