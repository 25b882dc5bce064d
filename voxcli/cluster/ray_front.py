"""The front door of a disaggregated placement (`--placement`, voxcli/placement.py) on Ray Serve.

`PlacementEngine` is `Engine.submit` over the placement's replicas (ray_roles.py): inside the `vox` ingress
app for `vox serve` (the same OpenAI API and /metrics: its gauges summed over the replicas' reports, and
every replica's own series labelled `replica=`, ray_metrics.py), in
the driver for `vox batch`. It polls every replica's stats each STATS_PERIOD_S and routes a new request to
the replica with the most slack (a both replica serves it whole; an LM replica generates it) and its chunks
to the codec replica with the most room (free slots less requests waiting), counting what it sent since the
last report as ray_router.py does. A split request is two calls: `generate` on the LM replica (which feeds
the chosen codec replica itself and returns how the request ended there) and the codec replica's streaming
`audio`. Either side failing or the user cancelling ends it on both sides with the reason, freeing the LM's
pages (its call is cancelled) and the codec's slot (the request is aborted there).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from voxcli.cluster.fit import run_bounded, serve_status
from voxcli.cluster.ray_app import ReplicaSpec, serve_until_interrupted
from voxcli.cluster.ray_metrics import METRICS_PERIOD_S, ReplicaCollector, gather
from voxcli.cluster.ray_roles import (
    CALL_TIMEOUT_S,
    STATS_PERIOD_S,
    RelayStats,
    deploy_replicas,
    describe_first,
    ray_init,
    ray_reason,
)
from voxcli.engine.request import Timeline
from voxcli.engine.roles import RoleEnd
from voxcli.engine.stream import AudioChunk, AudioStream
from voxcli.placement import Placement


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


@dataclass
class Playback:
    """What a front-door stream has delivered, as a listener hears it (epoch seconds): a later sentence
    (`continues=`) is due when this ends (engine.playback_end's rule, in the clock that crosses hops)."""

    first_epoch: float | None = None  # its first audio reached the front door
    from_epoch: float | None = None  # it is itself a later sentence: it plays after this
    audio_s: float = 0.0  # delivered so far

    def end_epoch(self, now: float) -> float:
        start = self.first_epoch if self.first_epoch is not None else now
        if self.from_epoch is not None:
            start = max(start, self.from_epoch)
        return start + self.audio_s


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
        self.replica_metrics: dict[str, dict[str, Any] | None] = {}  # the latest gather (ray_metrics.py)
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
        every = max(1, round(METRICS_PERIOD_S / STATS_PERIOD_S))
        for n in itertools.count():
            if self._closed.wait(STATS_PERIOD_S):
                return
            self._poll_once()
            if n % every == 0:
                self.gather_metrics()

    def gather_metrics(self) -> None:
        """Every replica's own counters and gauges, into the cache /metrics renders (one call each)."""
        got = gather([b for bs in self.backends.values() for b in bs], CALL_TIMEOUT_S)
        with self._lock:
            self.replica_metrics = got

    def metric_rows(self) -> list[tuple[str, str, dict[str, Any] | None]]:
        with self._lock:
            cache = dict(self.replica_metrics)
        return [(b.name, b.role, cache.get(b.name)) for bs in self.backends.values() for b in bs
                if b.name in cache]

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
        """`continues` (the previous sentence's stream from this front door): the sentence goes to an LM
        replica, admitted there and on its codec replica against the end of the earlier audio (epoch
        seconds cross the hop), as the single engine does. A both replica's `synthesize` takes no
        continuation, so a later sentence is routed among LM replicas when there are any."""
        self._check(request)
        rid = next(self._ids)
        stream = AudioStream(rid, request.request_id, self.sample_rate, Timeline(rid), self._cancel)
        stream.playback = Playback()  # type: ignore[attr-defined]
        prev = getattr(continues, "playback", None)
        if prev is not None:
            stream.playback.from_epoch = prev.end_epoch(time.time())  # type: ignore[attr-defined]
        lms = self.backends["lm"]
        target = self._pick(lms if prev is not None and lms else self.backends["both"] + lms)
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
        playback: Playback = self.stream.playback  # type: ignore[attr-defined]
        if playback.first_epoch is None:
            playback.first_epoch = time.time()
        playback.audio_s += len(pcm) / self.front.sample_rate
        self.stream.deliver(AudioChunk(pcm, self.front.sample_rate, self.index, time.monotonic(),
                                       self.offset_s, False))
        self.index += 1
        self.offset_s += len(pcm) / self.front.sample_rate

    def _finish(self, status: str, reason: str | None) -> None:
        self.stream.end(status, reason)
        self.front._done(self.stream.request_id)

    def run(self) -> None:
        try:
            if self.target.role == "both":
                self._run_both()
            else:
                self._run_split()
        except Exception as e:  # noqa: BLE001 - our bug: end this request loudly, never hang it
            self._finish("failed", f"internal error in the front door: {ray_reason(e)}")

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
            return "rejected", ray_reason(e)
        if isinstance(cause, RequestFailed) or isinstance(e, RequestFailed):
            return "failed", ray_reason(e)
        return "failed", f"the {where.role} replica {where.name} failed mid-stream ({ray_reason(e)})"

    def _run_split(self) -> None:
        front, lm = self.front, self.target
        codec = self.codec = front._pick(front.backends["codec"])
        try:
            codec.handle.open.remote(self.key).result(timeout_s=CALL_TIMEOUT_S)
            self.audio_resp = codec.handle.options(method_name="audio", stream=True).remote(self.key)
        except Exception as e:  # noqa: BLE001
            why = ray_reason(e)
            self._finish("failed", f"the codec replica {codec.name} did not open the request ({why})")
            return
        pump = _POOL.submit(self._pump)
        self._forward(lm, codec)
        pump.result()

    def _forward(self, lm: _Backend, codec: _Backend) -> None:
        """The LM replica generates, feeding the codec replica itself; here: how it ended there."""
        due = self.stream.playback.from_epoch  # type: ignore[attr-defined]
        self.lm_resp = lm.handle.generate.remote(self.request, self.key, codec.name, due)
        try:
            end: RoleEnd = self.lm_resp.result()
        except Exception as e:  # noqa: BLE001 - the LM replica failed (or the call was cancelled)
            if not self.cancelled.is_set():
                self._abort_codec(f"the LM replica {lm.name} failed mid-stream ({ray_reason(e)})")
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

        from voxcli.server.service import SpeechService
        from voxcli.session import Session

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

            app = create_app(self.service, api_key=api_key)
            # /metrics per replica: each replica's own series, labelled replica= and role=
            app.state.metrics.registry.register(ReplicaCollector(self.service.engine.metric_rows))
            return app

        def relay_stats(self) -> dict[str, float]:
            return self.service.engine.relay().per_chunk()

    return serve.deployment(VoxFrontDoor, name="vox", num_replicas=1, max_ongoing_requests=4096,
                            ray_actor_options=FRONT_DOOR_RESOURCES).bind()


FRONT_DOOR_RESOURCES = {"num_cpus": 0.5}


def start_placement(spec: ReplicaSpec, placement: Placement, host: str, port: int, quiet: bool,
                    pcm_scale: float = 0.0) -> dict[str, list[str]]:
    """Deploy every replica, then the front door on host:port; returns the replicas' app names."""
    ray_init(quiet)
    from ray import serve

    serve.start(http_options={"host": host, "port": port})
    try:
        names = deploy_replicas(spec, placement, pcm_scale=pcm_scale, extra=FRONT_DOOR_RESOURCES)
        model_spec, model, cap = describe_first(names)
        front = _front_door(names, model_spec, model, cap, spec.api_key, spec.limits)
        run_bounded(lambda: serve.run(front, name="vox", route_prefix="/"), "vox", serve_status)
    except BaseException:  # a start that fails (or is interrupted) leaves nothing deployed behind
        serve.shutdown()
        raise
    return names


def run_placement(placement: Placement, spec: ReplicaSpec, host: str, port: int, quiet: bool) -> None:
    """`vox serve --placement ...`: deploy, then serve until Ctrl-C (SIGTERM too, where the caller
    maps it: `vox serve` does); either stops a start still waiting for its replicas as well."""
    try:
        start_placement(spec, placement, host, port, quiet)
    except KeyboardInterrupt:
        return  # stopped while starting: start_placement shut Serve down
    serve_until_interrupted(f"serving placement {placement.describe()} on http://{host}:{port} via Ray Serve",
                            quiet)


def batch_placement_session(placement: Placement, spec: ReplicaSpec, quiet: bool) -> Any:
    """`vox batch --placement ...`: a Session whose engine is the front door, in this process (no HTTP)."""
    @contextlib.contextmanager
    def session() -> Iterator[Any]:
        ray_init(quiet)
        from ray import serve

        from voxcli.session import Session

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
