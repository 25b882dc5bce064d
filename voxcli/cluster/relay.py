"""The links between role replicas: per LM <-> codec pair, TWO long-lived streaming calls, one each way.

    codes   LM -> codec: the LM replica's chunks for that codec replica (`LMReplica.codes_for`, a call the
            codec replica opens on its first request from that LM and keeps), and how a request ended
            there when it did not end well (`RoleEnd`, `Refused`).
    work    codec -> LM: what the LM replica must do for that codec replica's requests
            (`CodecReplica.work_for`, a call the LM replica opens when the codec's codes call reaches it,
            and keeps): generate a request, its first audio's time, cancel a request.

So a split request costs ONE handle call, as a request on one engine does: the front door's streaming
`audio` call on the codec replica, which carries the request itself; the request, its first-audio time
and its cancel ride the work link to the LM replica, its chunks the codes link back.

Why streams. A Ray Serve handle call pays the whole request path every time (the caller's router and
its replica choice, the callee's queue and an asyncio task, a reply object, Serve's request metrics):
about 5 ms of host CPU across the processes. Items of a streaming call pay none of it: each is one object
the callee's core worker reports to the caller as the generator yields it, in order. Each side yields
everything waiting for the other side as ONE item.

Why chunks wait (`chunk_hold_s`: voxcli/engine/hold.py, whose rule the placement co-simulation applies
too). An item still costs both replicas a wake, Serve's streaming path on
each side and a serialisation, whatever it carries: with every chunk sent as it was made, an item
carried 1.0-1.1 chunks and the split cost 1.5-1.6x one engine's host CPU per request. But only chunk 0
is urgent (the first audio waits on it); a later chunk is made far ahead of its playback deadline (the
LM runs several times faster than real time). So a later chunk waits in the outbox up to CHUNK_HOLD_S,
never past its deadline less HOLD_LEAD_S, and whatever does not wait (a chunk 0, a bad end) takes
everything waiting along: 3-4 chunks an item, measured in benchmarks/bench_relay_cost.py. What a hold
costs: the hop's latency (p50 tens of ms; within each chunk's slack, so no deadline moves), and a last
chunk's codec slot held that much longer.

Why Serve's streaming calls and not plain Ray actor calls: an item costs the host the same on either
(benchmarks/bench_stream_item_cost.py: 2.28 ms through a Serve streaming handle, 2.19 ms through a plain
actor's streaming generator, net CPU per item, 2 cores at load 11). The cost is Ray core's per-item path
(the item's object, its report to the caller, a wake on each side), not Serve's router: leaving Serve
would give up its placement, health checks and restarts and save nothing; fewer items is the lever.

Why not Ray Compiled Graphs' channels: a compiled graph is a static DAG of plain actors, executed as a
whole per input; requests that start, stream a varying number of chunks and end independently, between
Serve replicas that Serve restarts and places, fit neither the static graph nor its actors (a failed
actor tears the graph down), and its shared-memory channels are per node. The streaming calls keep
Serve's placement, health checks and restarts, and cross nodes as any call does.

Failures. The codec replica's codes link to a dead LM replica ends with an error: every request it holds
from that LM fails with one sentence naming the LM replica (and its work not taken yet is dropped), and the
next request for that LM opens the link again (a restarted LM replica). The LM replica's work link to a
dead codec replica ends with an error: every request it generates for that codec replica is cancelled
(its pages free); the front door's `audio` call fails with one sentence naming the codec replica. Items
nobody pulls for STALE_S are dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from voxcli.engine.roles import CodeChunk

RELAY_KEEP = 100_000
STALE_S = 60.0  # chunks waiting this long with no codec replica pulling them are dropped


@dataclass(frozen=True)
class Work:
    """A codec replica's message to an LM replica for request `key` (the work link)."""

    kind: str  # "generate" (request, playback_epoch) | "first_audio" (epoch) | "cancel"
    key: str
    request: Any = None
    epoch: float | None = None  # generate: a later sentence's playback end; first_audio: its time


@dataclass(frozen=True)
class Refused:
    """The LM replica's submit refused request `key` as the user's mistake (the model's InputError): the
    codec replica's `audio` raises it, so a server answers 400."""

    key: str
    error: Exception


class Outbox:
    """Items waiting for one link's consumer (all on the replica's event loop): an LM replica's chunks
    (and ends) for one codec replica, or a codec replica's work for one LM replica. Every item has `key`.

    An item put with `hold_s` > 0 may wait up to that long for others to share its link item (`hold_s`
    for a chunk: `chunk_hold_s`); one put without a hold sends everything waiting at once, so nothing
    that is held is ever behind an item that is not, and order is kept."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self.items: list[Any] = []
        self.wake = asyncio.Event()
        self.consumer = 0  # the live `codes_for` call's token (a newer call supersedes an older one)
        self._tokens = 0
        self.clock = clock
        self.idle_since: float | None = clock()  # no consumer since then
        self.due = math.inf  # when what is waiting must leave (clock seconds): now, unless all of it holds

    def put(self, item: Any, hold_s: float = 0.0) -> None:
        now = self.clock()
        if self.idle_since is not None and now - self.idle_since > STALE_S:
            self.clear()  # nobody pulled for a long time: the codec replica is gone
        self.items.append(item)
        due = now + max(0.0, hold_s)
        if due < self.due:
            self.due = due
            self.wake.set()  # the sender's wait ends sooner (or now)

    def ready(self) -> bool:
        """Whether what is waiting must leave now."""
        return bool(self.items) and self.clock() >= self.due

    def take(self) -> list[Any]:
        batch, self.items, self.due = self.items, [], math.inf
        return batch

    def clear(self) -> None:
        self.items, self.due = [], math.inf

    def drop(self, key: str) -> None:
        """A request that ended here early (cancelled, failed): its items not sent yet go nowhere."""
        self.items = [c for c in self.items if c.key != key]
        if not self.items:
            self.due = math.inf

    def attach(self) -> int:
        self._tokens += 1
        self.consumer = self._tokens
        self.idle_since = None
        self.wake.set()  # an older call waiting wakes, sees it is superseded, and ends
        return self.consumer

    def detach(self, token: int) -> None:
        if self.consumer == token:
            self.consumer = 0
            self.idle_since = self.clock()


async def serve_items(box: Outbox, stats: RelayStats | None = None) -> AsyncIterator[list[Any]]:
    """The sending side of a link: everything waiting in `box`, one item per send (when something that
    does not hold arrives, or the earliest hold runs out), until superseded or cancelled (the other
    replica went away)."""
    me = box.attach()
    try:
        while box.consumer == me:
            if not box.ready():
                box.wake.clear()
                wait = box.due - box.clock()
                if wait == math.inf:
                    await box.wake.wait()
                elif wait > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(box.wake.wait(), wait)
                continue
            batch = box.take()
            if stats is not None:
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
    work_items: int = 0  # codec -> LM stream items (each carries every request, first-audio time, cancel)
    code_bytes: int = 0  # the codes' own bytes and chunk 0's binding (pickling adds ~0.3 kB per chunk)
    lm_to_codec_s: deque[float] = field(default_factory=lambda: deque(maxlen=RELAY_KEEP))
    # chunk 0's alone: it never waits in the outbox, so these are the link's own latency
    first_s: deque[float] = field(default_factory=lambda: deque(maxlen=RELAY_KEEP))

    def sent(self, batch: list[Any]) -> None:
        chunks = [c for c in batch if isinstance(c, CodeChunk)]
        self.items += 1
        self.chunks += len(chunks)
        self.code_bytes += sum(c.nbytes for c in chunks)

    def took(self, item: Any, now: float) -> None:
        if isinstance(item, CodeChunk):
            self.lm_to_codec_s.append(now - item.sent_epoch)
            if item.index == 0:
                self.first_s.append(now - item.sent_epoch)

    def raw(self) -> dict[str, Any]:
        return {"chunks": self.chunks, "items": self.items, "code_bytes": self.code_bytes,
                "work_items": self.work_items, "hops": list(self.lm_to_codec_s),
                "first_hops": list(self.first_s)}

    @classmethod
    def merged(cls, parts: list[dict[str, Any]]) -> RelayStats:
        out = cls()
        for p in parts:
            out.chunks += p["chunks"]
            out.items += p["items"]
            out.code_bytes += p["code_bytes"]
            out.work_items += p.get("work_items", 0)
            out.lm_to_codec_s.extend(p["hops"])
            out.first_s.extend(p.get("first_hops", ()))
        return out

    def per_chunk(self) -> dict[str, float]:
        """Per chunk: Ray messages (a codes link item LM -> codec for every `chunks_per_item` chunks, the
        PCM codec -> front door, one per chunk, and the work link's items codec -> LM: a request's own
        and its first audio's, fewer under load), code bytes, and the hop's latency percentiles."""
        n = max(1, self.chunks)
        hops, first = sorted(self.lm_to_codec_s), sorted(self.first_s)

        def pct(q: float, xs: list[float] | None = None) -> float:
            xs = hops if xs is None else xs
            return 1e3 * xs[min(len(xs) - 1, int(len(xs) * q))] if xs else 0.0

        return {"chunks": float(self.chunks),
                "messages_per_chunk": (self.items + self.work_items + self.chunks) / n,
                "chunks_per_item": self.chunks / max(1, self.items),
                "code_bytes_per_chunk": self.code_bytes / n,
                "hop_ms_p50": pct(0.5), "hop_ms_p90": pct(0.9), "hop_ms_p99": pct(0.99),
                "first_hop_ms_p50": pct(0.5, first), "first_hop_ms_p90": pct(0.9, first)}


class Link:
    """The pulling side of a link: one streaming call `method(me)` on replica app `peer`, every message of
    every item handed to `take(message, now)`; when the stream breaks or ends, `lost(reason)`."""

    method = ""
    peer_role = ""

    def __init__(self, peer: str, me: str, take: Any, lost: Any) -> None:
        self.peer = peer
        self.task = asyncio.create_task(self._pull(me, take, lost))

    async def _pull(self, me: str, take: Any, lost: Any) -> None:
        from ray import serve

        from voxcli.cluster.ray_errors import ray_reason

        handle = serve.get_deployment_handle(self.peer, app_name=self.peer)
        try:
            async for batch in handle.options(method_name=self.method, stream=True).remote(me):
                now = time.time()
                for message in batch:
                    take(message, now)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001 - the peer replica died (or restarted): its requests fail here
            lost(f"the {self.peer_role} replica {self.peer} failed mid-stream ({ray_reason(e)})")
            return
        lost(f"the {self.peer_role} replica {self.peer} closed its link")

    @property
    def alive(self) -> bool:
        return not self.task.done()

    def cancel(self) -> None:
        """Stop pulling (a newer link replaces this one); `lost` is not called."""
        self.task.cancel()


class CodeLink(Link):
    """The codec side of the codes link to LM replica app `peer`: chunks (and ends) in request order."""

    method, peer_role = "codes_for", "LM"


class WorkLink(Link):
    """The LM side of the work link to codec replica app `peer`: requests, first-audio times, cancels."""

    method, peer_role = "work_for", "codec"

