"""Disaggregated placements on Ray Serve: the role replicas (`--placement both=1,lm=2,codec=1`).

Every replica is a Ray Serve application of its own with one replica (`vox-both-0`, `vox-lm-0`,
`vox-lm-1`, `vox-codec-0`): the front door (ray_front.py) must address each one (a request's chunks stay
on one codec replica, where its slot lives, and it chooses among replicas of different roles), and Ray
Serve still does the placement (one GPU each), the transport, the health checks and the restarts.

A split request, per chunk (never per decode step): the LM replica's engine hands the chunk's `CodeChunk`
(roles.py: codes + deadline + arrival as epoch seconds, chunk 0 with the codec slot's binding) to the
outbox of the codec replica the front door chose, and that codec replica's link (relay.py: ONE streaming
call per LM -> codec pair, long-lived) carries it over as part of the next item, every chunk ready then in
one; the codec replica's streaming `audio` yields the PCM to the front door. Per chunk at most 2 Ray
messages, none of them a handle call; per request 3 calls (`generate`, `audio`, `first_audio`).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import asdict
from typing import Any

from voxcli.cluster.fit import SCHEDULE_TIMEOUT_S, check_fits, cluster_resources, run_bounded, serve_status
from voxcli.cluster.ray_app import ReplicaSpec, build_deployment, replica_resources
from voxcli.cluster.ray_metrics import replica_metrics
from voxcli.cluster.relay import CodeLink, CodeOutbox, RelayStats, serve_codes
from voxcli.cluster.signals import push_signals
from voxcli.engine.roles import CodeChunk, RoleEnd
from voxcli.placement import Placement

STATS_PERIOD_S = 0.2
GONE_KEEP = 10_000  # keys of requests that ended on a codec replica, kept to drop their late chunks
CALL_TIMEOUT_S = 30.0  # a stats report, a relay count: far beyond any healthy reply
CODEC_IDLE_TIMEOUT_S = 120.0  # a codec request neither fed nor read this long is reaped (CodecReplica)


def node_id() -> str:
    """The Ray node this replica runs on (which machine of a cluster)."""
    import ray

    return ray.get_runtime_context().get_node_id()


def _log_plan(role: str, engine: Any) -> None:
    """The replica's startup line (its Ray log): the role's memory plan, as `vox serve` prints its own."""
    import sys

    plan = getattr(engine, "memory_plan", None)
    print(f"vox {role} replica: {plan.summary() if plan is not None else 'memory plan: none (sim)'}",
          file=sys.stderr)


# --------------------------------------------------------------------------------------------- replicas
class LMReplica:
    """An LM-only engine behind Ray Serve: `generate` runs a request, its chunks leaving through the
    outbox of the codec replica the front door chose, which pulls them by `codes_for` (relay.py)."""

    def __init__(self, spec_dict: dict[str, Any], pcm_scale: float = 0.0, name: str = "") -> None:
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
        self._outboxes: dict[str, CodeOutbox] = {}  # codec app name -> chunks its link has not taken yet
        self.outcomes: Counter[str] = Counter()  # how the engine ended requests (/metrics per replica)

    def _outbox(self, codec: str) -> CodeOutbox:
        box = self._outboxes.get(codec)
        if box is None:
            box = self._outboxes[codec] = CodeOutbox()
        return box

    async def generate(self, request: Any, key: str, codec: str,
                       playback_epoch: float | None = None) -> RoleEnd:
        """Generate `request`, its chunks for codec replica app `codec`; returns how it ended here.
        `playback_epoch`: a later sentence, admitted against the end of the earlier ones' audio.
        The model's InputError for a bad request is raised (the front door's check, no round trip)."""
        loop = asyncio.get_running_loop()
        box = self._outbox(codec)
        ended: asyncio.Future[RoleEnd] = loop.create_future()

        def settle(item: RoleEnd) -> None:
            if not ended.done():
                ended.set_result(item)

        def sink(item: CodeChunk | RoleEnd) -> None:  # the engine's host thread: never block it
            try:
                if isinstance(item, RoleEnd):
                    self.outcomes[item.status] += 1
                    loop.call_soon_threadsafe(settle, item)
                else:
                    loop.call_soon_threadsafe(box.put, item)
            except RuntimeError:
                pass  # the replica's loop is gone: nobody is listening

        stream = await asyncio.to_thread(self.engine.submit, request, key=key, sink=sink,
                                         playback_epoch=playback_epoch)
        stream.drop_audio()  # the sink carries every item; the stream need not keep them
        end: RoleEnd | None = None
        try:
            end = await ended
            return end
        finally:
            if end is None or end.status != "done":
                box.drop(key)  # cancelled (or failed) here: what the link has not taken goes nowhere
            if not stream.finished:
                stream.cancel()  # cancelled by the front door (or it went away): free the pages

    async def codes_for(self, codec: str) -> Any:
        """The link to codec replica app `codec` (its one long-lived streaming call): lists of chunks."""
        async for batch in serve_codes(self._outbox(codec), self.relay):
            yield batch

    def first_audio(self, key: str, epoch: float) -> None:
        self.engine.first_audio(key, epoch)

    def stats(self) -> dict[str, float]:
        out = self.service.routing_stats()
        sched = self.engine.scheduler
        out.update(kv_pages_used=float(sched.kv.used), queued=float(len(sched.waiting)), codec_slots_used=0.0,
                   cpu_s=time.process_time())  # the replica's host CPU so far (the bench's per-chunk cost)
        return out

    async def load_signals(self, period_s: float) -> Any:
        """The front door's routing signals, pushed every `period_s` (signals.py)."""
        async for stats in push_signals(self.stats, period_s):
            yield stats

    def relay_stats(self) -> dict[str, Any]:
        return self.relay.raw()

    def metrics(self) -> dict[str, Any]:
        """This replica's counters and gauges (ray_metrics.py: the front door's /metrics per replica)."""
        sched, r = self.engine.scheduler, self.relay
        return replica_metrics(
            {"queued_requests": len(sched.waiting),
             "running_requests": len(sched.requests) - len(sched.waiting), "kv_pages_used": sched.kv.used},
            {"relay_chunks": r.chunks, "relay_items": r.items, "relay_code_bytes": r.code_bytes},
            self.outcomes)

    def describe(self) -> tuple[Any, str, Any]:
        s = self.service.session
        return s.spec, s.model, s.frame_cap

    def node(self) -> str:
        return node_id()

    def check(self, request: Any) -> None:
        self.service.check(request)


class CodecReplica:
    """A codec-only engine behind Ray Serve: `audio(key, lm)` streams a request's PCM while its chunks
    arrive over the link from LM replica app `lm` (relay.py: one streaming call per LM replica, opened by
    the first request from it and kept).

    Either may come first: a request's chunk 0 can reach the link before its `audio` call reaches this
    replica (two paths through Ray, no order between them), so the stream chunk 0 opened is kept for its
    `audio` call (`_opened`), and chunks of a request that ended here are dropped (`_gone`).

    The reaper: a request nobody claims would hold its slot (and its PCM) forever, e.g. when the front
    door dies before `audio`, or the LM replica stops sending without an end. So each request's last
    activity (a chunk taken, a chunk read by `audio`) is kept, and a thread ends any request idle longer
    than `idle_timeout_s` as failed with the reason, which frees its slot; /metrics counts them
    (`vox_replica_reaped_total`). The default is far beyond any healthy gap between chunks (at most a
    chunk's audio, ~1 s) and beyond the front door's call timeout (CALL_TIMEOUT_S)."""

    def __init__(self, spec_dict: dict[str, Any], pcm_scale: float = 0.0, name: str = "",
                 idle_timeout_s: float = CODEC_IDLE_TIMEOUT_S) -> None:
        import sys

        from voxcli.server.service import SWITCH_INTERVAL_S
        from voxcli.session import open_session

        sys.setswitchinterval(SWITCH_INTERVAL_S)
        s = ReplicaSpec(**spec_dict)
        self.name = name
        self.engine = open_session(s.options(), role="codec", pcm_scale=pcm_scale).engine
        _log_plan("codec", self.engine)
        self._opened: dict[str, Any] = {}  # key -> stream its chunk 0 opened, until its `audio` claims it
        self._reading: set[str] = set()  # keys whose `audio` call is live here
        # keys that ended here (the latest GONE_KEEP), with the reason when aborted before their audio call
        self._gone: OrderedDict[str, str | None] = OrderedDict()
        self._lm_of: dict[str, str] = {}  # key -> the LM replica app its chunks come from
        self._links: dict[str, CodeLink] = {}
        self.hops = RelayStats()
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
        self._forget(key, None)
        self._lm_of.pop(key, None)
        if key not in self._opened:  # an unclaimed stream stays for the reaper to forget
            self._active.pop(key, None)

    def _touch(self, key: str) -> None:
        self._active[key] = time.monotonic()

    def _forget(self, key: str, reason: str | None) -> None:
        self._gone.setdefault(key, reason)
        while len(self._gone) > GONE_KEEP:
            self._gone.popitem(last=False)

    def _reap_loop(self) -> None:
        period = min(1.0, self.idle_timeout_s / 4)
        while not self.engine._closed:
            time.sleep(period)
            self.reap(time.monotonic())

    def reap(self, now: float) -> list[str]:
        """End every request idle longer than the timeout (their slots free); returns their keys."""
        idle = [k for k, t in list(self._active.items()) if now - t > self.idle_timeout_s]
        for key in idle:
            if self._active.pop(key, None) is None:
                continue
            self._opened.pop(key, None)
            if not self.engine.holds(key):
                continue  # it ended meanwhile
            self.reaped += 1
            self.engine.abort(key, f"codec request {key}: nobody fed or read it for "
                                   f"{self.idle_timeout_s:g} s (its front door or LM replica went away)")
        return idle

    # --- the link side (the replica's event loop)
    link_class: Any = CodeLink  # (a test gives the replica links of its own, without Ray)

    def _link(self, lm: str) -> None:
        link = self._links.get(lm)
        if link is None or not link.alive:
            self._links[lm] = self.link_class(lm, self.name, self._take,
                                              lambda why, lm=lm: self._lost(lm, why))

    def _take(self, chunk: CodeChunk, now: float) -> None:
        """A chunk off a link: into the engine (in its request's order: one link per LM replica)."""
        self.hops.took(chunk, now)
        key = chunk.key
        if key in self._gone:
            return  # its request ended here (cancelled, failed): the rest is dropped
        try:
            stream = self.engine.feed(chunk)
        except LookupError:
            return  # ended here meanwhile
        self._touch(key)
        if chunk.index == 0 and key not in self._reading:
            self._opened[key] = stream  # chunk 0 came first: its `audio` call claims this stream

    def _lost(self, lm: str, reason: str) -> None:
        """The link to LM replica `lm` broke: every request here from it fails with the reason."""
        for key, source in self._lm_of.copy().items():
            if source == lm:
                self.engine.abort(key, reason)

    # --- the front door's calls
    def abort(self, key: str, reason: str) -> None:
        """Fail request `key` with `reason`; one not here yet (its audio call still on its way) fails
        when that call comes."""
        if not self.engine.holds(key):
            self._forget(key, reason)
        self.engine.abort(key, reason)

    def cancel(self, key: str) -> None:
        stream = self._opened.pop(key, None) or self.engine.attach(key)
        stream.cancel()

    async def audio(self, key: str, lm: str) -> Any:
        """Request `key`'s PCM chunks as it decodes them; its chunks come from LM replica app `lm`."""
        stream = self._opened.pop(key, None)
        if stream is None:
            if key in self._gone:
                from voxcli.engine.stream import RequestFailed

                raise RequestFailed(self._gone[key] or f"codec request {key} ended here before its audio "
                                    "was asked for")
            stream = self.engine.attach(key)
        self._reading.add(key)
        self._lm_of[key] = lm
        self._touch(key)
        self._link(lm)
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
            self._reading.discard(key)
            if not stream.finished:
                stream.cancel()

    def relay_stats(self) -> dict[str, Any]:
        return self.hops.raw()

    def node(self) -> str:
        return node_id()

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

    async def load_signals(self, period_s: float) -> Any:
        async for stats in push_signals(self.stats, period_s):
            yield stats


def _role_deployment(cls: type, name: str, spec: ReplicaSpec, pcm_scale: float, max_ongoing: int,
                     pin: dict[str, float] | None = None) -> Any:
    from ray import serve

    actor = replica_resources(spec)
    if pin:
        actor = {**actor, "resources": dict(pin)}
    options = {"num_replicas": 1, "ray_actor_options": actor,
               "max_ongoing_requests": max_ongoing, "health_check_period_s": 2}
    return serve.deployment(cls, name=name, **options).bind(asdict(spec), pcm_scale, name)


def deploy_replicas(spec: ReplicaSpec, placement: Placement, prefix: str = "vox", max_ongoing: int = 2048,
                    pcm_scale: float = 0.0, extra: dict[str, float] | None = None,
                    schedule_timeout_s: float | None = None,
                    pin: dict[str, dict[str, float]] | None = None) -> dict[str, list[str]]:
    """Deploy one Serve application per replica; returns the app names by role. First whether the
    cluster can hold them all (and `extra`, the front door's resources), then each deployment bounded
    in time (`voxcli.cluster.fit`): one sentence instead of waiting for resources forever. `pin`: custom
    Ray resources per role ("lm", "codec"), e.g. a resource only one node has, to put a role there."""
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
                                       max_ongoing, (pin or {}).get(role))
            run_bounded(lambda app=app, name=name: serve.run(app, name=name, route_prefix=None), name,
                        serve_status, timeout_s=bound)
            names[role].append(name)
    return names


def describe_first(names: dict[str, list[str]]) -> tuple[Any, str, Any]:
    """(ModelSpec, model name, frame cap) from the first LM or both replica."""
    from ray import serve

    name = (names["lm"] + names["both"])[0]
    return serve.get_deployment_handle(name, app_name=name).describe.remote().result(timeout_s=120)


def ray_init(quiet: bool, num_cpus: float | None = None) -> bool:
    """Connect to (or start) Ray unless this process already is; True when this call did it."""
    try:
        import ray
        from ray import serve  # noqa: F401
    except ImportError:
        from voxcli.errors import VoxError

        raise VoxError("--placement needs Ray Serve: pip install 'voxcli[ray]'.", 2) from None

    if ray.is_initialized():
        return False
    ray.init(address=os.environ.get("RAY_ADDRESS") or None, include_dashboard=False, num_cpus=num_cpus,
             log_to_driver=not quiet, logging_level="WARNING" if quiet else "INFO")
    return True
