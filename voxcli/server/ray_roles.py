"""Disaggregated placements on Ray Serve: `--placement both=1,lm=2,codec=1` (voxcli/placement.py).

Every replica is a Ray Serve application of its own with one replica (`vox-both-0`, `vox-lm-0`,
`vox-lm-1`, `vox-codec-0`): the front door must address each one (a request's chunks stay on one codec
replica, where its slot lives, and it chooses among replicas of different roles), and Ray Serve still
does the placement (one GPU each), the transport, the health checks and the restarts. The front door
(`PlacementEngine`, inside the `vox` ingress app for `vox serve`, in the driver for `vox batch`) polls each
replica's stats every STATS_PERIOD_S and routes a new request to the replica with the most slack (a both
replica serves it whole; an LM replica generates it) and its chunks to the codec replica with the most room
(free slots less requests waiting), counting what it sent since the last report as in ray_router.py.

A split request, per chunk (never per decode step): the LM replica hands the chunk's `CodeChunk` (roles.py:
codes + deadline + arrival as epoch seconds) straight to the codec replica the front door chose, by a
`feed` handle call (one in flight per LM -> codec pair, carrying every chunk ready meanwhile: `_Feeder`;
so the chunks stay in order), and the codec replica's streaming `audio` yields the PCM to the front door:
at most 3 Ray messages per chunk, the codes crossing once (each LM replica's `RelayStats` counts them,
the bytes and the hop's latency). The front door's `generate` call
on the LM replica returns how the request ended there. Failure or cancellation of either side ends the
request on the other: the front door cancels the LM's call (its pages are freed) or aborts the codec
request (its slot is freed) with the reason, and the user's stream ends with it ("the codec replica
vox-codec-0 failed mid-stream: ...").
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from voxcli.engine.request import Timeline
from voxcli.engine.roles import CodeChunk, RoleEnd
from voxcli.engine.stream import AudioChunk, AudioStream
from voxcli.placement import Placement
from voxcli.server.ray_app import ReplicaSpec, build_deployment, replica_resources, serve_until_interrupted

STATS_PERIOD_S = 0.2
RELAY_KEEP = 100_000
CALL_TIMEOUT_S = 30.0  # one chunk's feed, a stats report: far beyond any healthy reply


def _reason(e: BaseException) -> str:
    """The replica's own message for an exception that came back through Ray (not its traceback)."""
    cause = getattr(e, "cause", None)
    if isinstance(cause, BaseException):
        e = cause
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


# --------------------------------------------------------------------------------------------- replicas
class LMReplica:
    """An LM-only engine behind Ray Serve: `generate` runs a request, feeding its chunks to a codec app."""

    def __init__(self, spec_dict: dict[str, Any], pcm_scale: float = 0.0) -> None:
        import sys

        from voxcli.server.cli import SWITCH_INTERVAL_S
        from voxcli.server.service import SpeechService
        from voxcli.server.sessions import open_session

        sys.setswitchinterval(SWITCH_INTERVAL_S)
        s = ReplicaSpec(**spec_dict)
        session = open_session(s.model, s.executor, s.gpu, s.recipe, s.sets, s.policy, s.device, role="lm",
                               pcm_scale=pcm_scale)
        self.service = SpeechService(session)  # its routing_stats: the LM's slack
        self.engine = session.engine
        self.relay = RelayStats()
        self._feeders: dict[str, _Feeder] = {}

    def _feeder(self, name: str) -> _Feeder:
        feeder = self._feeders.get(name)
        if feeder is None:
            from ray import serve

            handle = serve.get_deployment_handle(name, app_name=name)
            feeder = self._feeders[name] = _Feeder(handle, self.relay)
        return feeder

    async def generate(self, request: Any, key: str, codec: str) -> RoleEnd:
        """Generate `request`, feeding each chunk to codec replica app `codec`; returns how it ended."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[CodeChunk | RoleEnd] = asyncio.Queue()
        feeder = self._feeder(codec)

        def sink(item: CodeChunk | RoleEnd) -> None:  # the engine's host thread: never block it
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:
                pass  # the replica's loop is gone: nobody is listening

        stream = await asyncio.to_thread(self.engine.submit, request, key=key, sink=sink)
        stream.drop_audio()  # the sink carries every item; the stream need not keep them
        try:
            while True:
                item = await queue.get()
                if isinstance(item, RoleEnd):
                    return item
                try:
                    await feeder.send(item)
                except Exception as e:  # noqa: BLE001 - the codec replica failed: end the request here
                    reason = f"the codec replica {codec} failed mid-stream ({_reason(e)})"
                    return RoleEnd(key, "failed", reason)
        finally:
            if not stream.finished:
                stream.cancel()  # cancelled by the front door (or it went away): free the pages

    def first_audio(self, key: str, epoch: float) -> None:
        self.engine.first_audio(key, epoch)

    def stats(self) -> dict[str, float]:
        out = self.service.routing_stats()
        sched = self.engine.scheduler
        out.update(kv_pages_used=float(sched.kv.used), queued=float(len(sched.waiting)), codec_slots_used=0.0)
        return out

    def relay_stats(self) -> dict[str, Any]:
        return self.relay.raw()

    def describe(self) -> tuple[Any, str, Any]:
        s = self.service.session
        return s.spec, s.model, s.frame_cap

    def check(self, request: Any) -> None:
        self.service.check(request)


class CodecReplica:
    """A codec-only engine behind Ray Serve: `open` a request, `feed` its chunks, stream its `audio`."""

    def __init__(self, spec_dict: dict[str, Any], pcm_scale: float = 0.0) -> None:
        import sys

        from voxcli.server.cli import SWITCH_INTERVAL_S
        from voxcli.server.sessions import open_session

        sys.setswitchinterval(SWITCH_INTERVAL_S)
        s = ReplicaSpec(**spec_dict)
        self.engine = open_session(s.model, s.executor, s.gpu, s.recipe, s.sets, s.policy, s.device,
                                   role="codec", pcm_scale=pcm_scale).engine
        self._opened: dict[str, Any] = {}  # key -> stream, until its `audio` call claims it

    def open(self, key: str) -> None:
        self._opened[key] = self.engine.attach(key)

    async def feed(self, chunks: list[CodeChunk]) -> list[str | None]:
        """Chunks of any requests, each in its request's order; per chunk None or why it was refused."""
        out: list[str | None] = []
        for chunk in chunks:
            try:
                self.engine.feed(chunk)
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
                    yield ch.pcm
                if over:
                    stream._raise_for_status(cancelled_raises=False)
                    return
                await wake.wait()
                wake.clear()
        finally:
            if not stream.finished:
                stream.cancel()

    def stats(self) -> dict[str, float]:
        sched = self.engine.scheduler
        return {"room": float(self.engine.room()), "codec_slots_used": float(sched.slots.used),
                "kv_pages_used": 0.0, "queued": float(len(sched.waiting))}


def _role_deployment(cls: type, name: str, spec: ReplicaSpec, pcm_scale: float, max_ongoing: int) -> Any:
    from ray import serve

    options = {"num_replicas": 1, "ray_actor_options": replica_resources(spec),
               "max_ongoing_requests": max_ongoing, "health_check_period_s": 2}
    return serve.deployment(cls, name=name, **options).bind(asdict(spec), pcm_scale)


def deploy_replicas(spec: ReplicaSpec, placement: Placement, prefix: str = "vox", max_ongoing: int = 2048,
                    pcm_scale: float = 0.0) -> dict[str, list[str]]:
    """Deploy one Serve application per replica; returns the app names by role."""
    from ray import serve

    names: dict[str, list[str]] = {"both": [], "lm": [], "codec": []}
    for role, n in (("codec", placement.codec), ("lm", placement.lm), ("both", placement.both)):
        for i in range(n):
            name = f"{prefix}-{role}-{i}"
            if role == "both":
                app = build_deployment(spec, 1, max_ongoing, name=name, router=False)
            else:
                app = _role_deployment(LMReplica if role == "lm" else CodecReplica, name, spec, pcm_scale,
                                       max_ongoing)
            serve.run(app, name=name, route_prefix=None)
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


# --------------------------------------------------------------------------------------------- front door
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


@dataclass
class _Backend:
    role: str
    name: str
    handle: Any
    stats: dict[str, float] | None = None
    routed: int = 0  # requests (both/lm) or opened codec requests sent since its last report

    def slack(self) -> float:
        if self.stats is None:
            return -1e9 - self.routed  # not reported (or failing): last resort
        key = "room" if self.role == "codec" else "slack"
        return self.stats.get(key, 0.0) - self.routed


_POOL = ThreadPoolExecutor(max_workers=4096, thread_name_prefix="vox-front")


class PlacementEngine:
    """`Engine.submit` over a placement's replicas (the front door): an AudioStream per request."""

    def __init__(self, names: dict[str, list[str]], sample_rate: int, frame_seconds: float) -> None:
        from ray import serve

        # Engine.submit raises the model's InputError for a bad request: the front door asks a replica
        # first (one round trip, ~1 ms of TTFA), so one bad request fails alone and as the user's mistake
        self._check = remote_check((names["lm"] + names["both"])[0])
        self.sample_rate = sample_rate
        self.frame_seconds = frame_seconds
        self.backends = {role: [_Backend(role, n, serve.get_deployment_handle(n, app_name=n)) for n in ns]
                         for role, ns in names.items()}
        self._ids = itertools.count(1)
        self._jobs: dict[int, _Job] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        # the first reports come from the poller's thread: this may run inside a replica's constructor,
        # where a blocking handle call is refused (until then every replica ranks as unreported, alike)
        self._poller = threading.Thread(target=self._poll, name="vox-front-stats", daemon=True)
        self._poller.start()

    # --- routing
    def _poll_once(self) -> None:
        pending = [(b, b.handle.options(method_name="record_routing_stats" if b.role == "both" else "stats")
                    .remote()) for bs in self.backends.values() for b in bs]
        for b, resp in pending:
            try:
                stats = resp.result(timeout_s=CALL_TIMEOUT_S)
            except Exception:  # noqa: BLE001 - a replica down (restarting): route around it meanwhile
                stats = None
            with self._lock:
                b.stats, b.routed = stats, 0

    def _poll(self) -> None:
        while not self._closed.wait(STATS_PERIOD_S):
            self._poll_once()

    def _pick(self, candidates: list[_Backend]) -> _Backend:
        with self._lock:
            best = max(candidates, key=lambda b: b.slack())
            best.routed += 1
        return best

    def relay(self) -> RelayStats:
        """Chunks, messages, bytes and hop latencies over every LM replica (one call to each)."""
        parts = [b.handle.relay_stats.remote().result(timeout_s=CALL_TIMEOUT_S) for b in self.backends["lm"]]
        return RelayStats.merged(parts)

    def totals(self) -> dict[str, float]:
        """Summed over the replicas' latest reports (the front door's /metrics and /health)."""
        out = {"queued": 0.0, "kv_pages_used": 0.0, "codec_slots_used": 0.0}
        with self._lock:
            for bs in self.backends.values():
                for b in bs:
                    for k in out:
                        out[k] += (b.stats or {}).get(k, 0.0)
        return out

    # --- requests
    def submit(self, request: Any, continues: Any = None) -> AudioStream:
        """`continues` cannot travel (each sentence may land on another replica; its admission decides)."""
        self._check(request)
        rid = next(self._ids)
        stream = AudioStream(rid, request.request_id, self.sample_rate, Timeline(rid), self._cancel)
        target = self._pick(self.backends["both"] + self.backends["lm"])
        job = _Job(self, stream, request, target)
        with self._lock:
            self._jobs[rid] = job
        _POOL.submit(job.run)
        return stream

    def _cancel(self, rid: int) -> None:
        with self._lock:
            job = self._jobs.get(rid)
        if job is not None:
            job.cancel()

    def _done(self, rid: int) -> None:
        with self._lock:
            self._jobs.pop(rid, None)

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            jobs = list(self._jobs.values())
        for job in jobs:
            job.cancel()


class _Job:
    """One request through the front door: whole on a both replica, or LM replica -> codec replica."""

    def __init__(self, front: PlacementEngine, stream: AudioStream, request: Any, target: _Backend) -> None:
        self.front, self.stream, self.request, self.target = front, stream, request, target
        self.key = f"req-{uuid.uuid4().hex[:16]}"
        self.codec: _Backend | None = None
        self.lm_resp: Any = None
        self.audio_resp: Any = None
        self.cancelled = threading.Event()
        self.offset_s = 0.0
        self.index = 0
        self.abort_reason: tuple[str, bool] | None = None

    def _push(self, pcm: Any) -> None:
        self.stream._push(AudioChunk(pcm, self.front.sample_rate, self.index, time.monotonic(), self.offset_s,
                                     False))
        self.index += 1
        self.offset_s += len(pcm) / self.front.sample_rate

    def _finish(self, status: str, reason: str | None) -> None:
        self.stream._finish(status, reason)
        self.front._done(self.stream.request_id)

    def run(self) -> None:
        try:
            if self.target.role == "both":
                self._run_both()
            else:
                self._run_split()
        except Exception as e:  # noqa: BLE001 - our bug: end this request loudly, never hang it
            self._finish("failed", f"internal error in the front door: {_reason(e)}")

    def _run_both(self) -> None:
        resp = self.target.handle.options(method_name="synthesize", stream=True).remote(self.request)
        self.lm_resp = resp
        try:
            for pcm in resp:
                self._push(pcm)
        except Exception as e:  # noqa: BLE001
            self._finish(*self._ended(e, self.target))
            return
        self._finish("done" if not self.cancelled.is_set() else "cancelled", None)

    def _ended(self, e: BaseException, where: _Backend) -> tuple[str, str]:
        if self.cancelled.is_set():
            return "cancelled", "cancelled by the user"
        cause = getattr(e, "cause", e)
        from voxcli.engine.stream import RequestFailed, RequestRejected

        if isinstance(cause, RequestRejected) or isinstance(e, RequestRejected):
            return "rejected", _reason(e)
        if isinstance(cause, RequestFailed) or isinstance(e, RequestFailed):
            return "failed", _reason(e)
        return "failed", f"the {where.role} replica {where.name} failed mid-stream ({_reason(e)})"

    def _run_split(self) -> None:
        front, lm = self.front, self.target
        codec = self.codec = front._pick(front.backends["codec"])
        try:
            codec.handle.open.remote(self.key).result(timeout_s=CALL_TIMEOUT_S)
            self.audio_resp = codec.handle.options(method_name="audio", stream=True).remote(self.key)
        except Exception as e:  # noqa: BLE001
            self._finish("failed", f"the codec replica {codec.name} did not open the request ({_reason(e)})")
            return
        pump = _POOL.submit(self._pump)
        self._forward(lm, codec)
        pump.result()

    def _forward(self, lm: _Backend, codec: _Backend) -> None:
        """The LM replica generates, feeding the codec replica itself; here: how it ended there."""
        self.lm_resp = lm.handle.generate.remote(self.request, self.key, codec.name)
        try:
            end: RoleEnd = self.lm_resp.result()
        except Exception as e:  # noqa: BLE001 - the LM replica failed (or the call was cancelled)
            if not self.cancelled.is_set():
                self._abort_codec(f"the LM replica {lm.name} failed mid-stream ({_reason(e)})")
            return
        if end.status != "done" and not self.cancelled.is_set():
            self._abort_codec(f"the LM replica {lm.name} ended the request: {end.status} ({end.reason})",
                              rejected=end.status == "rejected")

    def _abort_codec(self, reason: str, rejected: bool = False) -> None:
        self.abort_reason = (reason, rejected)
        try:
            self.codec.handle.abort.remote(self.key, reason)  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - the codec is gone too: the pump ends the stream
            pass
        if self.lm_resp is not None:
            self.lm_resp.cancel()

    def _pump(self) -> None:
        """Codec replica -> the user's stream; the first audio's time goes back to the LM replica."""
        codec, lm = self.codec, self.target
        assert codec is not None
        try:
            for pcm in self.audio_resp:
                if self.index == 0:
                    lm.handle.first_audio.remote(self.key, time.time())
                self._push(pcm)
        except Exception as e:  # noqa: BLE001
            status, reason = self._ended(e, codec)
            aborted = self.abort_reason
            if aborted is not None and aborted[1]:
                status = "rejected"
            if self.lm_resp is not None:
                self.lm_resp.cancel()  # the LM replica frees its pages
            self._finish(status, reason)
            return
        self._finish("cancelled" if self.cancelled.is_set() else "done",
                     "cancelled by the user" if self.cancelled.is_set() else None)

    def cancel(self) -> None:
        self.cancelled.set()
        for resp in (self.lm_resp, self.audio_resp):
            if resp is not None:
                resp.cancel()
        if self.codec is not None:
            try:
                self.codec.handle.cancel.remote(self.key)
            except Exception:  # noqa: BLE001
                pass


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


# --------------------------------------------------------------------------------------------- entry points
def remote_check(name: str) -> Any:
    """The model's request check, run on replica app `name`; its InputError is raised here, unwrapped. It
    may be called on an event loop (a route): the round trip (~1 ms) then blocks that loop."""
    from ray import serve

    handle = serve.get_deployment_handle(name, app_name=name)

    def check(request: Any) -> None:
        try:
            handle.check.remote(request).result(timeout_s=CALL_TIMEOUT_S, _skip_asyncio_check=True)
        except Exception as e:
            cause = getattr(e, "cause", None)
            raise (cause if isinstance(cause, Exception) else e) from None

    return check


class PlacementService:
    """`SpeechService` over the front door: the same OpenAI API; /metrics gauges sum the replicas' reports."""

    @staticmethod
    def build(front: PlacementEngine, model_spec: Any, model: str, frame_cap: Any, check_name: str,
              limits: Any) -> Any:

        from voxcli.cli import Session
        from voxcli.server.service import SpeechService

        session = Session(engine=front, spec=model_spec, model=model, check=remote_check(check_name),
                          frame_cap=frame_cap, backend="placement on Ray Serve")
        service = SpeechService(session, limits)
        service.queued = lambda: int(front.totals()["queued"])  # type: ignore[method-assign]
        service.kv_pages_used = lambda: int(front.totals()["kv_pages_used"])  # type: ignore[method-assign]
        service.codec_slots_used = lambda: int(front.totals()["codec_slots_used"])  # type: ignore[method-assign]
        return service


def _front_door(names: dict[str, list[str]], model_spec: Any, model: str, frame_cap: Any,
                api_key: str | None, limits: dict[str, float]) -> Any:
    """The `vox` ingress app: the OpenAI API over a PlacementEngine (one replica, CPU)."""
    from ray import serve

    from voxcli.server.service import Limits

    @serve.ingress()
    class VoxFrontDoor:
        def __init__(self) -> None:
            front = PlacementEngine(names, model_spec.sample_rate, model_spec.frame_seconds)
            check_name = (names["lm"] + names["both"])[0]
            self.service = PlacementService.build(front, model_spec, model, frame_cap, check_name,
                                                  Limits(**limits))

        def __serve_build_asgi_app__(self) -> Any:
            from voxcli.server.app import create_app

            return create_app(self.service, api_key=api_key)

        def relay_stats(self) -> dict[str, float]:
            return self.service.engine.relay().per_chunk()

    return serve.deployment(VoxFrontDoor, name="vox", num_replicas=1, max_ongoing_requests=4096,
                            ray_actor_options={"num_cpus": 0.5}).bind()


def start_placement(spec: ReplicaSpec, placement: Placement, host: str, port: int, quiet: bool,
                    pcm_scale: float = 0.0) -> dict[str, list[str]]:
    """Deploy every replica, then the front door on host:port; returns the replicas' app names."""
    ray_init(quiet)
    from ray import serve

    serve.start(http_options={"host": host, "port": port})
    names = deploy_replicas(spec, placement, pcm_scale=pcm_scale)
    model_spec, model, cap = describe_first(names)
    serve.run(_front_door(names, model_spec, model, cap, spec.api_key, spec.limits), name="vox",
              route_prefix="/")
    return names


def run_placement(placement: Placement, spec: ReplicaSpec, host: str, port: int, quiet: bool) -> None:
    """`vox serve --placement ...`: deploy, then serve until Ctrl-C."""
    start_placement(spec, placement, host, port, quiet)
    serve_until_interrupted(f"serving placement {placement.describe()} on http://{host}:{port} via Ray Serve",
                            quiet)


def batch_placement_session(placement: Placement, spec: ReplicaSpec, quiet: bool) -> Any:
    """`vox batch --placement ...`: a Session whose engine is the front door, in this process (no HTTP)."""
    import contextlib

    @contextlib.contextmanager
    def session() -> Iterator[Any]:
        ray_init(quiet)
        from ray import serve

        from voxcli.cli import Session

        serve.start(proxy_location="Disabled")
        front = None
        try:
            names = deploy_replicas(spec, placement, prefix="vox-batch")
            model_spec, model, cap = describe_first(names)
            front = PlacementEngine(names, model_spec.sample_rate, model_spec.frame_seconds)
            check = remote_check((names["lm"] + names["both"])[0])
            yield Session(engine=front, spec=model_spec, model=model, check=check, frame_cap=cap,
                          backend=f"placement {placement.describe()} on Ray Serve")
        finally:
            if front is not None:
                front.close()
            serve.shutdown()

    return session()
