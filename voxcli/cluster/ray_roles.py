"""Disaggregated placements on Ray Serve: the role replicas (`--placement both=1,lm=2,codec=1`).

Every replica is a Ray Serve application of its own with one replica (`vox-both-0`, `vox-lm-0`,
`vox-lm-1`, `vox-codec-0`): the front door (ray_front.py) must address each one (a request's chunks stay
on one codec replica, where its slot lives, and it chooses among replicas of different roles), and Ray
Serve still does the placement (one GPU each), the transport, the health checks and the restarts.

A split request, per chunk (never per decode step): the LM replica hands the chunk's `CodeChunk` (roles.py:
codes + deadline + arrival as epoch seconds) straight to the codec replica the front door chose, by a
`feed` handle call (one in flight per LM -> codec pair, carrying every chunk ready meanwhile: `_Feeder`;
so the chunks stay in order), and the codec replica's streaming `audio` yields the PCM to the front door:
at most 3 Ray messages per chunk, the codes crossing once (each LM replica's `RelayStats` counts them,
the bytes and the hop's latency).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import Counter, deque
from dataclasses import asdict, dataclass, field
from typing import Any

from voxcli.cluster.fit import SCHEDULE_TIMEOUT_S, check_fits, cluster_resources, run_bounded, serve_status
from voxcli.cluster.ray_app import ReplicaSpec, build_deployment, replica_resources
from voxcli.cluster.ray_metrics import replica_metrics
from voxcli.engine.roles import CodeChunk, RoleEnd
from voxcli.placement import Placement

STATS_PERIOD_S = 0.2
RELAY_KEEP = 100_000
CALL_TIMEOUT_S = 30.0  # one chunk's feed, a stats report: far beyond any healthy reply
CODEC_IDLE_TIMEOUT_S = 120.0  # a codec request not fed nor read this long is reaped (CodecReplica)


def ray_reason(e: BaseException) -> str:
    """The replica's own message for an exception that came back through Ray (not its traceback)."""
    cause = getattr(e, "cause", None)
    if isinstance(cause, BaseException):
        e = cause
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


def _log_plan(role: str, engine: Any) -> None:
    """The replica's startup line (its Ray log): the role's memory plan, as `vox serve` prints its own."""
    import sys

    plan = getattr(engine, "memory_plan", None)
    print(f"vox {role} replica: {plan.summary() if plan is not None else 'memory plan: none (sim)'}",
          file=sys.stderr)


# --------------------------------------------------------------------------------------------- replicas
class LMReplica:
    """An LM-only engine behind Ray Serve: `generate` runs a request, feeding its chunks to a codec app."""

    def __init__(self, spec_dict: dict[str, Any], pcm_scale: float = 0.0) -> None:
        import sys

        from voxcli.server.service import SWITCH_INTERVAL_S, SpeechService
        from voxcli.session import open_session

        sys.setswitchinterval(SWITCH_INTERVAL_S)
        s = ReplicaSpec(**spec_dict)
        session = open_session(s.options(), role="lm", pcm_scale=pcm_scale)
        self.service = SpeechService(session)  # its routing_stats: the LM's slack
        self.engine = session.engine
        _log_plan("lm", self.engine)
        self.relay = RelayStats()
        self._feeders: dict[str, _Feeder] = {}
        self.outcomes: Counter[str] = Counter()  # how the engine ended requests (/metrics per replica)

    def _feeder(self, name: str) -> _Feeder:
        feeder = self._feeders.get(name)
        if feeder is None:
            from ray import serve

            handle = serve.get_deployment_handle(name, app_name=name)
            feeder = self._feeders[name] = _Feeder(handle, self.relay)
        return feeder

    async def generate(self, request: Any, key: str, codec: str,
                       playback_epoch: float | None = None) -> RoleEnd:
        """Generate `request`, feeding each chunk to codec replica app `codec`; returns how it ended.
        `playback_epoch`: a later sentence, admitted against the end of the earlier ones' audio."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[CodeChunk | RoleEnd] = asyncio.Queue()
        feeder = self._feeder(codec)

        def sink(item: CodeChunk | RoleEnd) -> None:  # the engine's host thread: never block it
            if isinstance(item, RoleEnd):
                self.outcomes[item.status] += 1
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:
                pass  # the replica's loop is gone: nobody is listening

        stream = await asyncio.to_thread(self.engine.submit, request, key=key, sink=sink,
                                         playback_epoch=playback_epoch)
        stream.drop_audio()  # the sink carries every item; the stream need not keep them
        try:
            while True:
                item = await queue.get()
                if isinstance(item, RoleEnd):
                    return item
                try:
                    await feeder.send(item)
                except Exception as e:  # noqa: BLE001 - the codec replica failed: end the request here
                    reason = f"the codec replica {codec} failed mid-stream ({ray_reason(e)})"
                    return RoleEnd(key, "failed", reason)
        finally:
            if not stream.finished:
                stream.cancel()  # cancelled by the front door (or it went away): free the pages

    def first_audio(self, key: str, epoch: float) -> None:
        self.engine.first_audio(key, epoch)

    def stats(self) -> dict[str, float]:
        out = self.service.routing_stats()
        sched = self.engine.scheduler
        out.update(kv_pages_used=float(sched.kv.used), queued=float(len(sched.waiting)), codec_slots_used=0.0,
                   cpu_s=time.process_time())  # the replica's host CPU so far (the bench's per-chunk cost)
        return out

    def relay_stats(self) -> dict[str, Any]:
        return self.relay.raw()

    def metrics(self) -> dict[str, Any]:
        """This replica's counters and gauges (ray_metrics.py: the front door's /metrics per replica)."""
        sched, r = self.engine.scheduler, self.relay
        return replica_metrics(
            {"queued_requests": len(sched.waiting),
             "running_requests": len(sched.requests) - len(sched.waiting), "kv_pages_used": sched.kv.used},
            {"relay_chunks": r.chunks, "relay_feeds": r.feeds, "relay_code_bytes": r.code_bytes},
            self.outcomes)

    def describe(self) -> tuple[Any, str, Any]:
        s = self.service.session
        return s.spec, s.model, s.frame_cap

    def check(self, request: Any) -> None:
        self.service.check(request)


class CodecReplica:
    """A codec-only engine behind Ray Serve: `open` a request, `feed` its chunks, stream its `audio`.

    The reaper: a request nobody claims would hold its slot (and its PCM) forever, e.g. when the front
    door dies between `open` and `audio`, or the LM replica stops feeding without an abort. So each
    request's last activity (open, a fed chunk, a chunk read by `audio`) is kept, and a thread ends any
    request idle longer than `idle_timeout_s` as failed with the reason, which frees its slot; /metrics
    counts them (`vox_replica_reaped_total`). The default is far beyond any healthy gap between chunks
    (at most a chunk's audio, ~1 s) and beyond the front door's call timeout (CALL_TIMEOUT_S)."""

    def __init__(self, spec_dict: dict[str, Any], pcm_scale: float = 0.0,
                 idle_timeout_s: float = CODEC_IDLE_TIMEOUT_S) -> None:
        import sys

        from voxcli.server.service import SWITCH_INTERVAL_S
        from voxcli.session import open_session

        sys.setswitchinterval(SWITCH_INTERVAL_S)
        s = ReplicaSpec(**spec_dict)
        self.engine = open_session(s.options(), role="codec", pcm_scale=pcm_scale).engine
        _log_plan("codec", self.engine)
        self._opened: dict[str, Any] = {}  # key -> stream, until its `audio` call claims it
        self.outcomes: Counter[str] = Counter()
        self.audio_chunks = 0
        self.engine.on_end = self._ended
        self.idle_timeout_s = idle_timeout_s
        self.reaped = 0
        self._active: dict[str, float] = {}  # key -> its last activity (monotonic), until it ends here
        self._reaper = threading.Thread(target=self._reap_loop, name="vox-codec-reaper", daemon=True)
        self._reaper.start()

    def _ended(self, key: str, status: str, reason: str | None) -> None:  # the engine's host thread
        self.outcomes[status] += 1
        self._active.pop(key, None)

    def _touch(self, key: str) -> None:
        self._active[key] = time.monotonic()

    def _reap_loop(self) -> None:
        period = min(1.0, self.idle_timeout_s / 4)
        while not self.engine._closed:
            time.sleep(period)
            self.reap(time.monotonic())

    def reap(self, now: float) -> list[str]:
        """End every request idle longer than the timeout (their slots free); returns their keys."""
        idle = [k for k, t in list(self._active.items()) if now - t > self.idle_timeout_s]
        for key in idle:
            if self._active.pop(key, None) is None or not self.engine.holds(key):
                continue  # it ended meanwhile
            self._opened.pop(key, None)
            self.reaped += 1
            self.engine.abort(key, f"codec request {key}: nobody fed or read it for "
                                   f"{self.idle_timeout_s:g} s (its front door or LM replica went away)")
        return idle

    def open(self, key: str) -> None:
        self._opened[key] = self.engine.attach(key)
        self._touch(key)

    async def feed(self, chunks: list[CodeChunk]) -> list[str | None]:
        """Chunks of any requests, each in its request's order; per chunk None or why it was refused."""
        out: list[str | None] = []
        for chunk in chunks:
            try:
                self.engine.feed(chunk)
                self._touch(chunk.key)
                out.append(None)
            except LookupError as e:  # this chunk's request is not here: the others go on
                out.append(str(e))
        return out

    def abort(self, key: str, reason: str) -> None:
        self.engine.abort(key, reason)

    def cancel(self, key: str) -> None:
        stream = self._opened.pop(key, None) or self.engine.attach(key)
        stream.cancel()

    async def audio(self, key: str) -> Any:
        stream = self._opened.pop(key, None)
        if stream is None:
            raise RuntimeError(f"internal error: codec request {key} was not opened here")
        loop = asyncio.get_running_loop()
        wake = asyncio.Event()

        def changed() -> None:
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:
                pass

        stream.on_change = changed
        try:
            while True:
                chunks, over = stream.take()
                for ch in chunks:
                    self.audio_chunks += 1
                    self._touch(key)
                    yield ch.pcm
                if over:
                    stream._raise_for_status(cancelled_raises=False)
                    return
                await wake.wait()
                wake.clear()
        finally:
            if not stream.finished:
                stream.cancel()

    def metrics(self) -> dict[str, Any]:
        sched = self.engine.scheduler
        waiting = len(sched.waiting)
        return replica_metrics(
            {"queued_requests": waiting, "running_requests": len(sched.requests) - waiting,
             "codec_slots_used": sched.slots.used},
            {"audio_chunks": self.audio_chunks, "reaped": self.reaped}, self.outcomes)

    def stats(self) -> dict[str, float]:
        sched = self.engine.scheduler
        return {"room": float(self.engine.room()), "codec_slots_used": float(sched.slots.used),
                "kv_pages_used": 0.0, "queued": float(len(sched.waiting)), "cpu_s": time.process_time()}


def _role_deployment(cls: type, name: str, spec: ReplicaSpec, pcm_scale: float, max_ongoing: int) -> Any:
    from ray import serve

    options = {"num_replicas": 1, "ray_actor_options": replica_resources(spec),
               "max_ongoing_requests": max_ongoing, "health_check_period_s": 2}
    return serve.deployment(cls, name=name, **options).bind(asdict(spec), pcm_scale)


def deploy_replicas(spec: ReplicaSpec, placement: Placement, prefix: str = "vox", max_ongoing: int = 2048,
                    pcm_scale: float = 0.0, extra: dict[str, float] | None = None,
                    schedule_timeout_s: float | None = None) -> dict[str, list[str]]:
    """Deploy one Serve application per replica; returns the app names by role. First whether the
    cluster can hold them all (and `extra`, the front door's resources), then each deployment bounded
    in time (`voxcli.cluster.fit`): one sentence instead of waiting for resources forever."""
    from ray import serve

    check_fits(placement, replica_resources(spec), cluster_resources(), extra)
    bound = SCHEDULE_TIMEOUT_S if schedule_timeout_s is None else schedule_timeout_s
    names: dict[str, list[str]] = {"both": [], "lm": [], "codec": []}
    for role, n in (("codec", placement.codec), ("lm", placement.lm), ("both", placement.both)):
        for i in range(n):
            name = f"{prefix}-{role}-{i}"
            if role == "both":
                app = build_deployment(spec, 1, max_ongoing, name=name, router=False)
            else:
                app = _role_deployment(LMReplica if role == "lm" else CodecReplica, name, spec, pcm_scale,
                                       max_ongoing)
            run_bounded(lambda app=app, name=name: serve.run(app, name=name, route_prefix=None), name,
                        serve_status, timeout_s=bound)
            names[role].append(name)
    return names


class _Feeder:
    """An LM replica's chunks to one codec replica: one `feed` call in flight at a time, carrying every
    chunk that became ready meanwhile (of any request), so under load a call carries many chunks and at
    light load one, at once (no waiting for company). One call in flight also keeps each request's chunks
    in order."""

    def __init__(self, handle: Any, relay: RelayStats) -> None:
        self.handle, self.relay = handle, relay
        self._queue: list[tuple[CodeChunk, asyncio.Future[None]]] = []
        self._task: asyncio.Task[None] | None = None

    async def send(self, item: CodeChunk) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((item, future))
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())
        await future

    async def _run(self) -> None:
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                refused = await self.handle.feed.remote([item for item, _ in batch])
            except Exception as e:  # noqa: BLE001 - the codec replica failed: every sender hears it
                for _, future in batch:
                    if not future.done():
                        future.set_exception(e)
                continue
            self.relay.batch(len(batch))
            for (item, future), why in zip(batch, refused, strict=True):
                if future.done():
                    continue
                if why is None:
                    self.relay.add(item)
                    future.set_result(None)
                else:
                    future.set_exception(LookupError(why))


@dataclass
class RelayStats:
    """What crossed between replicas for split requests (the front door's count)."""

    chunks: int = 0
    # per feed call 2 (LM -> codec with the codes of every chunk ready, its acknowledgement), per chunk 1
    # (codec -> front door, the PCM)
    messages: int = 0
    feeds: int = 0
    code_bytes: int = 0  # the codes' own bytes (pickling adds ~0.3 kB of fields per chunk)
    # chunk left the LM -> acknowledged by the codec, the latest RELAY_KEEP (a server runs for days)
    lm_to_codec_s: deque[float] = field(default_factory=lambda: deque(maxlen=RELAY_KEEP))

    def batch(self, chunks: int) -> None:
        self.feeds += 1
        self.messages += 2

    def add(self, item: CodeChunk) -> None:
        self.chunks += 1
        self.messages += 1
        self.code_bytes += item.nbytes
        self.lm_to_codec_s.append(time.time() - item.sent_epoch)

    def raw(self) -> dict[str, Any]:
        return {"chunks": self.chunks, "messages": self.messages, "feeds": self.feeds,
                "code_bytes": self.code_bytes, "hops": list(self.lm_to_codec_s)}

    @classmethod
    def merged(cls, parts: list[dict[str, Any]]) -> RelayStats:
        out = cls()
        for p in parts:
            out.chunks += p["chunks"]
            out.messages += p["messages"]
            out.feeds += p["feeds"]
            out.code_bytes += p["code_bytes"]
            out.lm_to_codec_s.extend(p["hops"])
        return out

    def per_chunk(self) -> dict[str, float]:
        n = max(1, self.chunks)
        hops = sorted(self.lm_to_codec_s)
        return {"chunks": float(self.chunks), "messages_per_chunk": self.messages / n,
                "chunks_per_feed": self.chunks / max(1, self.feeds),
                "code_bytes_per_chunk": self.code_bytes / n,
                "hop_ms_p50": 1e3 * hops[len(hops) // 2] if hops else 0.0,
                "hop_ms_p90": 1e3 * hops[int(len(hops) * 0.9)] if hops else 0.0}


def describe_first(names: dict[str, list[str]]) -> tuple[Any, str, Any]:
    """(ModelSpec, model name, frame cap) from the first LM or both replica."""
    from ray import serve

    name = (names["lm"] + names["both"])[0]
    return serve.get_deployment_handle(name, app_name=name).describe.remote().result(timeout_s=120)


def ray_init(quiet: bool, num_cpus: float | None = None) -> None:
    try:
        import ray
        from ray import serve  # noqa: F401
    except ImportError:
        from voxcli.errors import VoxError

        raise VoxError("--placement needs Ray Serve: pip install 'voxcli[ray]'.", 2) from None

    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS") or None, include_dashboard=False, num_cpus=num_cpus,
                 log_to_driver=not quiet, logging_level="WARNING" if quiet else "INFO")
