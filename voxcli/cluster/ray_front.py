"""The front door of a disaggregated placement (`--placement`, voxcli/placement.py) on Ray Serve.

`PlacementEngine` is `Engine.submit` over the placement's replicas (ray_roles.py): inside the `vox` ingress
app for `vox serve` (the same OpenAI API and /metrics: its gauges summed over the replicas' reports, and
every replica's own series labelled `replica=`, ray_metrics.py), in
the driver for `vox batch`. Every replica pushes its stats over one long-lived streaming call
(signals.py), and the front door routes a new request on the latest it holds, never waiting, to the replica
with the most slack (a both replica serves it whole; an LM replica generates it) and its chunks
to the codec replica with the most room (free slots less requests waiting), counting what it sent since the
last report as ray_router.py does. A split request is ONE call, as on one engine: the chosen codec
replica's streaming `audio`, which carries the request and the LM replica chosen for it; the codec replica
hands it on over its work link to that LM replica and gets the chunks back over its codes link (relay.py).
No call waits before it: the model's check of the request runs in the LM replica's submit, and its
InputError comes back as this stream's error (before any audio: a server answers 400). Either side failing
ends the stream with one sentence naming the replica; the user cancelling ends it on both sides (the codec
replica frees its slot and sends the cancel on to the LM replica, which frees its pages).
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
from voxcli.cluster.ray_errors import ray_cause, ray_reason
from voxcli.cluster.ray_metrics import METRICS_PERIOD_S, ReplicaCollector, gather
from voxcli.cluster.ray_roles import CALL_TIMEOUT_S, deploy_replicas, describe_first, ray_init
from voxcli.cluster.relay import RelayStats
from voxcli.cluster.signals import SIGNAL_PERIOD_S, SignalFeed
from voxcli.engine.load import EngineLoad
from voxcli.engine.request import Timeline
from voxcli.engine.stream import AudioChunk, AudioStream
from voxcli.models.base import InputError
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


class FrontStream(AudioStream):
    """A front-door stream: a request the LM replica refused as the user's mistake (the model's
    InputError, raised by its submit) raises that InputError, as `Engine.submit` would have."""

    invalid: InputError | None = None

    def raise_for_status(self, cancelled_raises: bool = False) -> None:
        if self.invalid is not None:
            raise self.invalid
        super().raise_for_status(cancelled_raises)


class PlacementEngine:
    """`Engine.submit` over a placement's replicas (the front door): an AudioStream per request."""

    program = None  # the model lives in the replicas
    takes_text_feed = False  # a fed request cannot travel: one request per sentence

    def __init__(self, names: dict[str, list[str]], sample_rate: int, frame_seconds: float) -> None:
        from ray import serve

        self.sample_rate = sample_rate
        self.frame_seconds = frame_seconds
        self.backends = {role: [_Backend(role, n, serve.get_deployment_handle(n, app_name=n)) for n in ns]
                         for role, ns in names.items()}
        self._by_name = {b.name: b for bs in self.backends.values() for b in bs}
        self._ids = itertools.count(1)
        self._jobs: dict[int, _Job] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.replica_metrics: dict[str, dict[str, Any] | None] = {}  # the latest gather (ray_metrics.py)
        # threads, not calls here: this may run inside a replica's constructor, where a blocking handle
        # call is refused (until the first reports every replica ranks as unreported, alike)
        self.signals = SignalFeed([(b.name, b.handle) for b in self._by_name.values()], self._store,
                                  SIGNAL_PERIOD_S)
        self._gatherer = threading.Thread(target=self._gather_loop, name="vox-front-metrics", daemon=True)
        self._gatherer.start()

    # --- routing
    def _store(self, name: str, stats: dict[str, float] | None) -> None:
        """A replica's pushed report (None: its stream broke): what routing reads from now on."""
        b = self._by_name[name]
        with self._lock:
            b.stats, b.routed = stats, 0

    def _poll_once(self) -> None:
        """Every replica's stats now, by a call each (tests and benchmarks want them fresh; routing uses
        the pushed reports)."""
        pending = [(b, b.handle.options(method_name="record_routing_stats" if b.role == "both" else "stats")
                    .remote()) for bs in self.backends.values() for b in bs]
        for b, resp in pending:
            try:
                stats = resp.result(timeout_s=CALL_TIMEOUT_S)
            except Exception:  # noqa: BLE001 - a replica down (restarting): route around it meanwhile
                stats = None
            with self._lock:
                b.stats, b.routed = stats, 0

    def _gather_loop(self) -> None:
        self.gather_metrics()  # at once: a scrape soon after start shows the replicas, not nothing
        while not self._closed.wait(METRICS_PERIOD_S):
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

    def pick(self, candidates: list[_Backend]) -> _Backend:
        """The candidate with the most slack (its latest report), counted as routed to."""
        with self._lock:
            best = max(candidates, key=lambda b: b.slack())
            best.routed += 1
        return best

    def relay(self) -> RelayStats:
        """Chunks, codes link items and bytes over every LM replica, the hop latencies and work link items
        over every codec replica (one call to each)."""
        sent = [b.handle.relay_stats.remote().result(timeout_s=CALL_TIMEOUT_S) for b in self.backends["lm"]]
        took = [b.handle.relay_stats.remote().result(timeout_s=CALL_TIMEOUT_S)
                for b in self.backends["codec"]]
        out = RelayStats.merged(sent)
        for part in took:
            out.lm_to_codec_s.extend(part["hops"])
            out.first_s.extend(part.get("first_hops", ()))
            out.work_items += part.get("work_items", 0)
        return out

    def load(self) -> EngineLoad:
        """Summed over the replicas' latest reports (the front door's /metrics and /health): the
        engine's load snapshot (voxcli/engine/load.py), as `Engine.load()` gives a single engine's."""
        out = {"queued": 0.0, "kv_pages_used": 0.0, "codec_slots_used": 0.0}
        with self._lock:
            for bs in self.backends.values():
                for b in bs:
                    for k in out:
                        out[k] += (b.stats or {}).get(k, 0.0)
        return EngineLoad(waiting=int(out["queued"]), kv_pages_used=int(out["kv_pages_used"]),
                          codec_slots_used=int(out["codec_slots_used"]))

    # The front door has no host loop of its own to die: a replica that dies fails its own requests.
    dead: str | None = None

    # --- requests
    def submit(self, request: Any, continues: Any = None) -> AudioStream:
        """`continues` (the previous sentence's stream from this front door): the sentence goes to an LM
        replica, admitted there and on its codec replica against the end of the earlier audio (epoch
        seconds cross the hop), as the single engine does. A both replica's `synthesize` takes no
        continuation, so a later sentence is routed among LM replicas when there are any."""
        rid = next(self._ids)
        stream = FrontStream(rid, request.request_id, self.sample_rate, Timeline(rid), self._cancel)
        stream.playback = Playback()  # type: ignore[attr-defined]
        prev = getattr(continues, "playback", None)
        if prev is not None:
            stream.playback.from_epoch = prev.end_epoch(time.time())  # type: ignore[attr-defined]
        lms = self.backends["lm"]
        target = self.pick(lms if prev is not None and lms else self.backends["both"] + lms)
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

    def done(self, rid: int) -> None:
        """Request `rid`'s job is over (its stream ended): the front door forgets it."""
        with self._lock:
            self._jobs.pop(rid, None)

    def close(self) -> None:
        self._closed.set()
        self.signals.close()
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
        self.front.done(self.stream.request_id)

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
        cause = ray_cause(e)
        from voxcli.engine.stream import RequestFailed, RequestRejected

        if isinstance(cause, InputError):  # a both replica's submit refused it: the user's mistake
            self.stream.invalid = cause  # type: ignore[attr-defined]
            return "failed", str(cause)

        if isinstance(cause, RequestRejected) or isinstance(e, RequestRejected):
            return "rejected", ray_reason(e)
        if isinstance(cause, RequestFailed) or isinstance(e, RequestFailed):
            return "failed", ray_reason(e)
        return "failed", f"the {where.role} replica {where.name} failed mid-stream ({ray_reason(e)})"

    def _run_split(self) -> None:
        """One call: the codec replica's streaming `audio`, which hands the request to LM replica `lm`
        over its work link (relay.py); the LM's refusal, failure or death comes back as this stream's
        error, already in one sentence."""
        front, lm = self.front, self.target
        codec = self.codec = front.pick(front.backends["codec"])
        due = self.stream.playback.from_epoch  # type: ignore[attr-defined]
        self.audio_resp = codec.handle.options(method_name="audio", stream=True).remote(
            self.key, lm.name, self.request, due)
        try:
            for pcm in self.audio_resp:
                self._push(pcm)
        except Exception as e:  # noqa: BLE001
            self._finish(*self._ended(e, codec))
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
CHECK_CACHE = 4096  # distinct requests whose check result the front door remembers


def remote_check(name: str) -> Any:
    """The model's request check, run on replica app `name`; its InputError is raised here, unwrapped.
    The check is a pure function of the request, so its answer is remembered (the latest CHECK_CACHE
    distinct requests, by a digest of the request without its id): a server's per-request template check
    (the same voice, language and options each time) costs a round trip once, not on every request's
    event loop. A request's own text is checked where it is generated (the LM replica's submit)."""
    import hashlib
    import pickle
    from collections import OrderedDict
    from dataclasses import replace

    from ray import serve

    handle = serve.get_deployment_handle(name, app_name=name)
    seen: OrderedDict[bytes, Exception | None] = OrderedDict()
    lock = threading.Lock()

    def check(request: Any) -> None:
        try:
            key = hashlib.blake2b(pickle.dumps(replace(request, request_id=None)), digest_size=16).digest()
        except Exception:  # noqa: BLE001 - a request that does not pickle is checked every time
            key = None
        with lock:
            known = key is not None and key in seen
            error = seen.get(key) if key is not None else None
        if not known:
            try:
                handle.check.remote(request).result(timeout_s=CALL_TIMEOUT_S, _skip_asyncio_check=True)
                error = None
            except Exception as e:
                cause = getattr(e, "cause", None)
                error = cause if isinstance(cause, Exception) else e
                if not isinstance(error, InputError):
                    raise error from None  # a replica's failure is not the request's answer: not kept
            if key is not None:
                with lock:
                    seen[key] = error
                    while len(seen) > CHECK_CACHE:
                        seen.popitem(last=False)
        if error is not None:
            raise error.with_traceback(None)  # the kept exception, without the frames of earlier raises

    return check


class PlacementService:
    """`SpeechService` over the front door: the same OpenAI API; /metrics gauges sum the replicas' reports."""

    @staticmethod
    def build(front: PlacementEngine, model_spec: Any, model: str, check_name: str, limits: Any) -> Any:
        from voxcli.server.service import SpeechService
        from voxcli.session import Session

        session = Session(engine=front, spec=model_spec, model=model, check=remote_check(check_name),
                          backend="placement on Ray Serve")
        return SpeechService(session, limits)  # its gauges read `front.load()`


def _front_door(names: dict[str, list[str]], model_spec: Any, model: str,
                api_key: str | None, limits: dict[str, float]) -> Any:
    """The `vox` ingress app: the OpenAI API over a PlacementEngine (one replica, CPU)."""
    from ray import serve

    from voxcli.server.service import Limits

    @serve.ingress()
    class VoxFrontDoor:
        def __init__(self) -> None:
            front = PlacementEngine(names, model_spec.sample_rate, model_spec.frame_seconds)
            check_name = (names["lm"] + names["both"])[0]
            self.service = PlacementService.build(front, model_spec, model, check_name, Limits(**limits))

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
        model_spec, model = describe_first(names)
        front = _front_door(names, model_spec, model, spec.api_key, spec.limits)
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
        owned = ray_init(quiet)
        from ray import serve

        from voxcli.session import Session

        serve.start(proxy_location="Disabled")
        front = None
        try:
            names = deploy_replicas(spec, placement, prefix="vox-batch")
            model_spec, model = describe_first(names)
            front = PlacementEngine(names, model_spec.sample_rate, model_spec.frame_seconds)
            check = remote_check((names["lm"] + names["both"])[0])
            yield Session(engine=front, spec=model_spec, model=model, check=check,
                          backend=f"placement {placement.describe()} on Ray Serve")
        finally:
            if front is not None:
                front.close()
            if owned:
                serve.shutdown()
            else:  # Ray (and Serve) were up before: leave the rest; deleting ours needs no waiting
                for name in list(serve.status().applications):
                    if name.startswith("vox-batch-"):
                        serve.delete(name, _blocking=False)

    return session()
