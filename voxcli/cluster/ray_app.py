"""Scale-out on Ray Serve: `vox serve --replicas N` runs N engines as replicas of one Ray Serve deployment,
each serving the same ASGI app (`create_app`) over its own engine; Ray Serve's HTTP proxy is the front
door on --host/--port, and requests go to the replica with the most slack (`ray_router.py`).

One replica per GPU (`num_gpus=1`) for the cuda executor; sim and cpu replicas ask for CPU only. Ray
does the placement, restarts and (with a cluster) the spread over machines: `ray start --head` on one
machine, `ray start --address=<head>:6379` on the others, then `RAY_ADDRESS=auto vox serve --replicas N`
on the head (docs/serving.md: Scale out). We build no cluster manager of our own.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from voxcli.cluster.fit import check_fits, cluster_resources, run_bounded, serve_status
from voxcli.placement import Placement
from voxcli.server.service import Limits
from voxcli.session import EngineOptions, serving_options

ROUTER = "voxcli.cluster.ray_router:MostSlackRouter"


@dataclass
class ReplicaSpec:
    """Everything a replica needs to open its own session (plain data: it travels to other processes)."""

    model: str | None
    executor: str | None
    gpu: str = ""
    recipe: str | None = None
    sets: list[str] = field(default_factory=list)
    policy: str | None = None
    device: str | None = None
    api_key: str | None = None
    limits: dict[str, float] = field(default_factory=dict)  # Limits as a dict (ints and seconds)

    def options(self) -> EngineOptions:
        """The replica's engine options; a real model queues every request as `vox serve` does."""
        return serving_options(self.model, self.executor, self.gpu, self.recipe, self.sets, self.policy,
                               self.device)


def replica_resources(spec: ReplicaSpec) -> dict[str, float]:
    if spec.executor == "cuda" or (spec.device or "").startswith("cuda"):
        return {"num_gpus": 1, "num_cpus": 1}
    if spec.executor == "sim":
        return {"num_cpus": 0.5}  # the simulated device costs only host work
    return {"num_cpus": 1}


def build_deployment(spec: ReplicaSpec, replicas: int, max_ongoing: int, name: str = "vox",
                     router: bool = True) -> Any:
    """The bound Ray Serve application: `replicas` copies of the vox app, most-slack routing (`router`;
    a placement's both replica is a deployment of one, routed by the front door: ray_roles.py)."""
    from ray import serve

    options: dict[str, Any] = {"num_replicas": replicas, "ray_actor_options": replica_resources(spec),
                               "max_ongoing_requests": max_ongoing, "health_check_period_s": 5}
    try:
        if not router:
            raise ImportError("the front door routes")
        from ray.serve.config import RequestRouterConfig

        from voxcli.cluster import ray_router

        options["request_router_config"] = RequestRouterConfig(
            request_router_class=ROUTER, request_routing_stats_period_s=ray_router.STATS_PERIOD_S,
            request_routing_stats_timeout_s=2.0)
    except ImportError:  # an older Ray Serve: its default router; a full replica still answers 503
        pass

    @serve.ingress()
    class VoxReplica:
        def __init__(self, spec_dict: dict[str, Any]) -> None:
            import sys

            from voxcli.server.service import SWITCH_INTERVAL_S, SpeechService
            from voxcli.session import open_session

            sys.setswitchinterval(SWITCH_INTERVAL_S)  # as in `vox serve`: the host loop gets the GIL sooner
            s = ReplicaSpec(**spec_dict)
            session = open_session(s.options())
            self.service = SpeechService(session, Limits(**s.limits))
            self.api_key = s.api_key
            self.outcomes: Counter[str] = Counter()  # synthesize's requests by how they ended (metrics)
            self.audio_chunks = 0

        def __serve_build_asgi_app__(self) -> Any:
            from voxcli.server.app import create_app

            return create_app(self.service, api_key=self.api_key)

        def record_routing_stats(self) -> dict[str, float]:
            return self.service.routing_stats()

        async def load_signals(self, period_s: float) -> Any:
            """A placement's front door: the routing stats, pushed every `period_s` (signals.py)."""
            from voxcli.cluster.signals import push_signals

            async for stats in push_signals(self.service.routing_stats, period_s):
                yield stats

        def metrics(self) -> dict[str, Any]:
            """Counters and gauges for a placement's front door (ray_metrics.py)."""
            from voxcli.cluster.ray_metrics import replica_metrics

            svc = self.service
            return replica_metrics({"queued_requests": svc.queued(), "running_requests": svc.active,
                                    "kv_pages_used": svc.kv_pages_used(),
                                    "codec_slots_used": svc.codec_slots_used()},
                                   {"audio_chunks": self.audio_chunks}, self.outcomes)

        def check(self, request: Any) -> None:
            """The model's cheap request check, for a driver without the model (`vox batch`)."""
            self.service.check(request)

        def describe(self) -> tuple[Any, str]:
            """(ModelSpec, model name) for a driver that submits through a handle: its Session.speak
            decides the frame cap from them as this replica's would."""
            session = self.service.session
            return session.spec, session.model

        async def synthesize(self, request: Any) -> Any:
            """One SynthesisRequest in, its PCM chunks out (`vox batch --replicas`: through a handle)."""
            import asyncio

            from voxcli.engine.stream import RequestRejected

            job = self.service.job(asyncio.get_running_loop())
            job.speak_prepared([request])
            outcome = "cancelled"
            try:
                while True:
                    item = await job.next()
                    if item.kind == "audio":
                        self.audio_chunks += 1
                        yield item.pcm
                    elif item.kind == "end":
                        outcome = "done"
                        return
                    else:
                        outcome = "rejected" if isinstance(item.error, RequestRejected) else "failed"
                        raise item.error or RuntimeError("synthesis failed")
            finally:
                self.outcomes[outcome] += 1
                job.cancel()

    return serve.deployment(VoxReplica, name=name, **options).bind(asdict(spec))


def start(spec: ReplicaSpec, replicas: int, host: str, port: int, max_ongoing: int = 2048,
          quiet: bool = False) -> None:
    """Start (or join, with RAY_ADDRESS) a Ray instance and deploy; returns once every replica is up."""
    import ray
    from ray import serve

    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS") or None, include_dashboard=False,
                 log_to_driver=not quiet, logging_level="WARNING" if quiet else "INFO")
    serve.start(http_options={"host": host, "port": port})
    app = build_deployment(spec, replicas, max_ongoing)
    try:  # as a placement's: what the cluster holds first, then the deployment bounded in time
        check_fits(Placement(both=replicas), replica_resources(spec), cluster_resources(),
                   flag=f"--replicas {replicas}")
        run_bounded(lambda: serve.run(app, name="vox", route_prefix="/"), "vox", serve_status)
    except BaseException:
        serve.shutdown()
        raise


def run_ray(replicas: int, model: str | None, executor: str | None, gpu: str, recipe: str | None,
            sets: list[str], policy: str | None, device: str | None, host: str, port: int,
            api_key: str | None, limits: Limits, quiet: bool) -> None:
    """`vox serve --replicas N`: deploy, then serve until Ctrl-C."""
    try:
        import ray  # noqa: F401
        from ray import serve  # noqa: F401
    except ImportError:
        from voxcli.errors import VoxError

        raise VoxError("--replicas needs Ray Serve: pip install 'voxcli[ray]'.", 2) from None
    spec = ReplicaSpec(model=model, executor=executor, gpu=gpu, recipe=recipe, sets=sets, policy=policy,
                       device=device, api_key=api_key, limits=asdict(limits))
    try:
        start(spec, replicas, host, port, quiet=quiet)
    except KeyboardInterrupt:
        return  # stopped while starting: start shut Serve down
    serve_until_interrupted(f"serving {replicas} replicas on http://{host}:{port} via Ray Serve", quiet)


def serve_until_interrupted(message: str, quiet: bool) -> None:
    """Say what is served, keep it up until Ctrl-C, then shut Ray Serve down."""
    from ray import serve

    if not quiet:
        from voxcli.console import say_line

        say_line(f"{message} (Ctrl-C stops)")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        serve.shutdown()


@dataclass
class _Chunk:
    pcm: Any


class _ReplicaStream:
    """A request on some replica, as `voxcli.speak.speak` reads an engine stream."""

    def __init__(self, response: Any) -> None:
        self._response = response

    def __iter__(self) -> Iterator[_Chunk]:
        for pcm in self._response:
            yield _Chunk(pcm)

    def cancel(self) -> None:
        self._response.cancel()

    def keep_audio(self, keep: bool) -> None:
        """Nothing to keep or forget: each chunk is yielded once, as the replica sends it."""


class ReplicaEngine:
    """`Engine.submit` over the deployment's replicas (Ray Serve routes each request, most slack first)."""

    program = None  # the model lives in the replicas
    takes_text_feed = False  # a fed request cannot travel: one request per sentence

    def __init__(self, handle: Any) -> None:
        self._handle = handle.options(method_name="synthesize", stream=True)

    def close(self) -> None:
        """Nothing held here: the deployment is shut down by whoever started it (batch_session)."""

    def submit(self, request: Any, continues: Any = None) -> _ReplicaStream:
        # `continues` (a later sentence, speak.py) cannot travel: each sentence may land on another
        # replica, whose admission decides on it alone
        return _ReplicaStream(self._handle.remote(request))


@contextlib.contextmanager
def batch_session(replicas: int, model: str | None, executor: str | None, recipe: str | None,
                  sets: list[str], policy: str | None, device: str | None, quiet: bool) -> Iterator[Any]:
    """`vox batch --replicas N`: a Session whose engine spreads the items over N replicas (no HTTP)."""
    try:
        import ray
        from ray import serve
    except ImportError:
        from voxcli.errors import VoxError

        raise VoxError("--replicas needs Ray Serve: pip install 'voxcli[ray]'.", 2) from None
    from voxcli.session import Session

    spec = ReplicaSpec(model=model, executor=executor, recipe=recipe, sets=sets, policy=policy, device=device)
    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS") or None, include_dashboard=False,
                 log_to_driver=not quiet, logging_level="WARNING" if quiet else "INFO")
    serve.start(proxy_location="Disabled")
    try:
        check_fits(Placement(both=replicas), replica_resources(spec), cluster_resources(),
                   flag=f"--replicas {replicas}")
        app = build_deployment(spec, replicas, max_ongoing=256)
        run_bounded(lambda: serve.run(app, name="vox-batch", route_prefix=None), "vox-batch", serve_status)
        handle = serve.get_app_handle("vox-batch")
        model_spec, name = handle.describe.remote().result()

        def check(request: Any) -> None:  # on a replica: the model's InputError comes back as raised
            handle.check.remote(request).result()

        yield Session(engine=ReplicaEngine(handle), spec=model_spec, model=name, check=check)
    finally:
        serve.shutdown()
