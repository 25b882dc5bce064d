"""Disaggregated placements on Ray Serve: the role replicas (`--placement both=1,lm=2,codec=1`).

Every replica is a Ray Serve application of its own with one replica (`vox-both-0`, `vox-lm-0`,
`vox-lm-1`, `vox-codec-0`): the front door (ray_front.py) must address each one (a request's chunks stay
on one codec replica, where its slot lives, and it chooses among replicas of different roles), and Ray
Serve still does the placement (one GPU each), the transport, the health checks and the restarts.

A split request, per chunk (never per decode step): the LM replica's engine hands the chunk's `CodeChunk`
(roles.py: codes + deadline + arrival as epoch seconds, chunk 0 with the codec slot's binding) to the
outbox of the codec replica the front door chose, and that codec replica's link (relay.py: ONE streaming
call per LM -> codec pair, long-lived) carries it over as part of the next item, every chunk waiting then
in one (a later chunk may wait a little, within its slack, so that several share an item); the codec
replica's streaming `audio` yields the PCM to the front door. Per chunk at most 2 Ray messages, none
of them a handle call; per request ONE call, the front door's `audio` on the codec replica, as on one
engine: the request, its first-audio time and its cancel reach the LM replica over the codec replica's
work link (relay.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import asdict
from typing import Any

from voxcli.cluster.fit import SCHEDULE_TIMEOUT_S, check_fits, cluster_resources, run_bounded, serve_status
from voxcli.cluster.ray_app import ReplicaSpec, build_deployment, replica_resources
from voxcli.cluster.ray_errors import ray_reason
from voxcli.cluster.ray_metrics import replica_metrics
from voxcli.cluster.relay import (
    CodeLink,
    Outbox,
    Refused,
    RelayStats,
    Work,
    WorkLink,
    serve_items,
)
from voxcli.cluster.signals import push_signals
from voxcli.engine.hold import CHUNK_HOLD_S, FIRST_AUDIO_HOLD_S, chunk_hold_s
from voxcli.engine.roles import CodeChunk, RoleEnd
from voxcli.engine.stream import EngineClosed
from voxcli.placement import Placement

STATS_PERIOD_S = 0.2
GONE_KEEP = 10_000  # keys of requests that ended on a codec replica, kept to drop their late chunks
CALL_TIMEOUT_S = 30.0  # a stats report, a relay count: far beyond any healthy reply
CODEC_IDLE_TIMEOUT_S = 120.0  # a codec request neither fed nor read this long is reaped (CodecReplica)
ROLE_SHUTDOWN_S = 2.0  # what a stopping role replica gives the requests it still serves


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
    """An LM-only engine behind Ray Serve. Its work comes from codec replicas over their work links (a
    request, its first audio's time, a cancel: `work_for`, pulled by `WorkLink`), and each request's
    chunks leave through the outbox of the codec replica that sent it, which pulls them by `codes_for`
    (relay.py): no handle call per request here."""

    link_class: Any = WorkLink  # (a test gives the replica links of its own, without Ray)

    def __init__(self, spec_dict: dict[str, Any], pcm_scale: float = 0.0, name: str = "",
                 chunk_hold: float = CHUNK_HOLD_S) -> None:
        import sys

        from voxcli.server.service import SWITCH_INTERVAL_S, SpeechService
        from voxcli.session import open_session

        sys.setswitchinterval(SWITCH_INTERVAL_S)
        s = ReplicaSpec(**spec_dict)
        self.name = name
        self.chunk_hold = chunk_hold  # how long a middle chunk may wait to share a codes link item (relay.py)
        session = open_session(s.options(), role="lm", pcm_scale=pcm_scale)
        self.service = SpeechService(session)  # its routing_stats: the LM's slack
        self.engine = session.engine
        _log_plan("lm", self.engine)
        self.relay = RelayStats()
        self._outboxes: dict[str, Outbox] = {}  # codec app name -> what its codes link has not taken yet
        self._links: dict[str, Any] = {}  # codec app name -> the work link pulling its requests
        self._running: dict[str, tuple[str, asyncio.Task[None]]] = {}  # key -> (its codec, its task)
        self.outcomes: Counter[str] = Counter()  # how the engine ended requests (/metrics per replica)

    def _outbox(self, codec: str) -> Outbox:
        box = self._outboxes.get(codec)
        if box is None:
            box = self._outboxes[codec] = Outbox()
        return box

    async def codes_for(self, codec: str) -> Any:
        """The codes link to codec replica app `codec` (its one long-lived streaming call): lists of chunks
        and ends. A codec replica opens it once, and again only when it restarted or its link broke (then
        it failed every request it had from here): so what runs here for it is ended, and this replica's
        work link to it is opened anew (an old one may not have seen the restart yet)."""
        self._codec_lost(codec)
        old = self._links.get(codec)
        if old is not None:
            old.cancel()
        link = self._links[codec] = self.link_class(
            codec, self.name, lambda work, now: self._work(codec, work),
            lambda why: self._links.get(codec) is link and self._codec_lost(codec))
        async for batch in serve_items(self._outbox(codec), self.relay):
            yield batch

    def _work(self, codec: str, work: Work) -> None:
        """A message from codec replica `codec` (this replica's event loop)."""
        if work.kind == "generate":
            task = asyncio.ensure_future(self._generate(work.request, work.key, codec, work.epoch))
            self._running[work.key] = (codec, task)
            task.add_done_callback(lambda _t, key=work.key: self._running.pop(key, None))
        elif work.kind == "first_audio" and work.epoch is not None:
            with contextlib.suppress(EngineClosed):  # closing: nothing more to schedule
                self.engine.first_audio(work.key, work.epoch)
        elif work.kind == "cancel":
            running = self._running.get(work.key)
            if running is not None:
                running[1].cancel()

    def _codec_lost(self, codec: str) -> None:
        """Codec replica `codec` is gone (its work link broke, or it linked anew): what this replica
        generates for it goes nowhere, so it stops."""
        for codec_of, task in list(self._running.values()):
            if codec_of == codec:
                task.cancel()
        self._outbox(codec).clear()

    async def _generate(self, request: Any, key: str, codec: str, playback_epoch: float | None) -> None:
        """Generate `request`, its chunks (and, unless it ended well, its end) for codec replica app
        `codec`. `playback_epoch`: a later sentence, admitted against the end of the earlier ones' audio.
        The model's InputError for a bad request goes back as `Refused` (the front door's check, no call)."""
        from voxcli.models.base import InputError

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
                    loop.call_soon_threadsafe(box.put, item, chunk_hold_s(item, self.chunk_hold))
            except RuntimeError:
                pass  # the replica's loop is gone: nobody is listening

        submitted = loop.run_in_executor(None, lambda: self.engine.submit(
            request, key=key, sink=sink, playback_epoch=playback_epoch))
        try:
            stream = await asyncio.shield(submitted)
        except asyncio.CancelledError:  # cancelled while submitting: the request it makes is not wanted
            submitted.add_done_callback(lambda f: f.cancelled() or f.exception() or f.result().cancel())
            raise
        except InputError as e:
            box.put(Refused(key, e))
            return
        except Exception as e:  # noqa: BLE001 - the engine refused or is closed: the codec side says why
            box.put(RoleEnd(key, "failed", ray_reason(e)))
            return
        stream.drop_audio()  # the sink carries every item; the stream need not keep them
        end: RoleEnd | None = None
        try:
            end = await ended
        finally:
            if end is None or end.status != "done":
                box.drop(key)  # cancelled (or failed) here: what the link has not taken goes nowhere
                if end is not None:
                    box.put(end)  # failed or rejected here: the codec side ends the request with why
            if not stream.finished:
                stream.cancel()  # cancelled by the codec side (or it went away): free the pages

    def stats(self) -> dict[str, float]:
        out = self.service.routing_stats()
        load = self.engine.load()
        out.update(kv_pages_used=float(load.kv_pages_used), queued=float(load.waiting), codec_slots_used=0.0,
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
        load, r = self.engine.load(), self.relay
        return replica_metrics(
            {"queued_requests": load.waiting, "running_requests": load.running,
             "kv_pages_used": load.kv_pages_used},
            {"relay_chunks": r.chunks, "relay_items": r.items, "relay_code_bytes": r.code_bytes},
            self.outcomes)

    def describe(self) -> tuple[Any, str]:
        s = self.service.session
        return s.spec, s.model

    def node(self) -> str:
        return node_id()

    def check(self, request: Any) -> None:
        self.service.check(request)


class CodecReplica:
    """A codec-only engine behind Ray Serve, where a split request starts: the front door's streaming
    `audio(key, lm, request)` streams the request's PCM; the request goes to LM replica app `lm` over
    this replica's work link to it (`work_for`), with its first audio's time and, when it ends here
    first (cancelled, failed), its cancel; its chunks come back over the codes link from that LM
    (relay.py: one streaming call each way per LM replica, opened by the first request for it and kept).

    The work always leaves after the `audio` call started here, so a chunk of a request whose `audio`
    call is not live here belongs to one that ended here: it is dropped. A request cancelled before its
    `audio` call arrived (two calls from the front door, no order between them) is kept in `_gone`.

    The reaper: a request nobody feeds would hold its slot (and its PCM) forever, e.g. when the LM
    replica stops sending without an end. So each request's last activity (a chunk taken, a chunk read by
    `audio`) is kept, and a thread ends any request idle longer than `idle_timeout_s` as failed with the
    reason, which frees its slot; /metrics counts them (`vox_replica_reaped_total`). The default is far
    beyond any healthy gap between chunks (at most a chunk's audio, ~1 s)."""

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
        self._reading: set[str] = set()  # keys whose `audio` call is live here
        # keys that ended here (the latest GONE_KEEP), with the reason when ended before their audio call
        self._gone: OrderedDict[str, str | None] = OrderedDict()
        self._lm_of: dict[str, str] = {}  # key -> the LM replica app that generates it
        self._ends: dict[str, BaseException] = {}  # key -> what its `audio` raises (the LM refused it)
        self._links: dict[str, CodeLink] = {}
        self._work: dict[str, Outbox] = {}  # LM replica app -> what its work link has not taken yet
        self._loop: asyncio.AbstractEventLoop | None = None  # the replica's event loop (the links')
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
        self._active.pop(key, None)
        lm = self._lm_of.pop(key, None)
        if lm is not None and status != "done" and self._loop is not None:
            try:  # ended here first (cancelled, failed, reaped): the LM replica stops generating it
                self._loop.call_soon_threadsafe(self._send, lm, Work("cancel", key))
            except RuntimeError:
                pass  # the replica's loop is gone

    def _touch(self, key: str) -> None:
        self._active[key] = time.monotonic()

    def _forget(self, key: str, reason: str | None) -> None:
        self._gone.setdefault(key, reason)
        while len(self._gone) > GONE_KEEP:
            self._gone.popitem(last=False)

    def _reap_loop(self) -> None:
        period = min(1.0, self.idle_timeout_s / 4)
        while not self.engine.closed:
            time.sleep(period)
            self.reap(time.monotonic())

    def reap(self, now: float) -> list[str]:
        """End every request idle longer than the timeout (their slots free); returns their keys."""
        idle = [k for k, t in list(self._active.items()) if now - t > self.idle_timeout_s]
        for key in idle:
            if self._active.pop(key, None) is None or not self.engine.holds(key):
                continue  # it ended meanwhile
            self.reaped += 1
            self.engine.abort(key, f"codec request {key}: nobody fed or read it for "
                                   f"{self.idle_timeout_s:g} s (its front door or LM replica went away)")
        return idle

    # --- the links (the replica's event loop)
    link_class: Any = CodeLink  # (a test gives the replica links of its own, without Ray)

    def _link(self, lm: str) -> None:
        link = self._links.get(lm)
        if link is None or not link.alive:
            self._links[lm] = self.link_class(lm, self.name, self._take,
                                              lambda why, lm=lm: self._lost(lm, why))

    def _send(self, lm: str, work: Work, hold_s: float = 0.0) -> None:
        box = self._work.get(lm)
        if box is None:
            box = self._work[lm] = Outbox()
        box.put(work, hold_s)

    async def work_for(self, lm: str) -> Any:
        """The work link to LM replica app `lm` (its one long-lived streaming call): lists of `Work`."""
        if lm not in self._work:
            self._work[lm] = Outbox()
        async for batch in serve_items(self._work[lm]):
            self.hops.work_items += 1
            yield batch

    def _take(self, item: CodeChunk | RoleEnd | Refused, now: float) -> None:
        """An item off a codes link: a chunk into the engine (in its request's order: one link per LM
        replica), or how the request ended on the LM replica when it did not end well."""
        self.hops.took(item, now)
        key = item.key
        if key not in self._reading:
            return  # its request ended here (cancelled, failed): the rest is dropped
        if isinstance(item, (Refused, RoleEnd)):  # it ended there: nothing to cancel there
            lm = self._lm_of.pop(key, None)
            if isinstance(item, Refused):
                self._ends[key] = item.error
                self.engine.abort(key, f"the request was refused: {item.error}")
                return
            why = f"the LM replica {lm} ended the request: {item.status} ({item.reason})"
            if item.status == "rejected":
                from voxcli.engine.stream import RequestRejected

                self._ends[key] = RequestRejected(why)
            self.engine.abort(key, why)
        else:
            try:
                self.engine.feed(item)
            except LookupError:
                return  # ended here meanwhile
            self._touch(key)

    def _lost(self, lm: str, reason: str) -> None:
        """The codes link to LM replica `lm` broke: every request here from it fails with the reason, and
        the work for it not taken yet is dropped (a restarted LM replica starts clean)."""
        for key, source in self._lm_of.copy().items():
            if source == lm:
                del self._lm_of[key]  # nothing to cancel there
                self.engine.abort(key, reason)
        box = self._work.get(lm)
        if box is not None:
            box.clear()

    # --- the front door's calls
    def cancel(self, key: str) -> None:
        self.engine.attach(key).cancel()

    async def audio(self, key: str, lm: str, request: Any, playback_epoch: float | None = None) -> Any:
        """Request `key`'s PCM chunks as it decodes them, generated by LM replica app `lm`. `playback_epoch`:
        a later sentence, admitted against the end of the earlier ones' audio (epoch seconds)."""
        if key in self._gone:
            from voxcli.engine.stream import RequestFailed

            raise RequestFailed(self._gone[key] or f"codec request {key} ended here before its audio was "
                                "asked for")
        self._loop = loop = asyncio.get_running_loop()
        stream = self.engine.attach(key)
        self._reading.add(key)
        self._lm_of[key] = lm
        self._touch(key)
        self._link(lm)
        self._send(lm, Work("generate", key, request, playback_epoch))
        wake = asyncio.Event()

        def changed() -> None:
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:
                pass

        stream.on_change = changed
        first = True
        try:
            while True:
                chunks, over = stream.take()
                for ch in chunks:
                    if first:  # the LM's later deadlines follow this replica's first audio (roles.py)
                        first = False
                        self._send(lm, Work("first_audio", key, epoch=time.time()), FIRST_AUDIO_HOLD_S)
                    self.audio_chunks += 1
                    self._touch(key)
                    yield ch.pcm
                if over:
                    end = self._ends.pop(key, None)
                    if end is not None:
                        raise end
                    stream.raise_for_status()
                    return
                await wake.wait()
                wake.clear()
        finally:
            self._reading.discard(key)
            self._ends.pop(key, None)
            if not stream.finished:
                stream.cancel()

    def relay_stats(self) -> dict[str, Any]:
        return self.hops.raw()

    def node(self) -> str:
        return node_id()

    def metrics(self) -> dict[str, Any]:
        load = self.engine.load()
        return replica_metrics(
            {"queued_requests": load.waiting, "running_requests": load.running,
             "codec_slots_used": load.codec_slots_used},
            {"audio_chunks": self.audio_chunks, "reaped": self.reaped}, self.outcomes)

    def stats(self) -> dict[str, float]:
        load = self.engine.load()
        return {"room": float(self.engine.room()), "codec_slots_used": float(load.codec_slots_used),
                "kv_pages_used": 0.0, "queued": float(load.waiting), "cpu_s": time.process_time()}

    async def load_signals(self, period_s: float) -> Any:
        async for stats in push_signals(self.stats, period_s):
            yield stats


def _role_deployment(cls: type, name: str, spec: ReplicaSpec, pcm_scale: float, max_ongoing: int,
                     pin: dict[str, float] | None = None, **extra: Any) -> Any:
    from ray import serve

    actor = replica_resources(spec)
    if pin:
        actor = {**actor, "resources": dict(pin)}
    # a role replica always has calls in flight, its links (relay.py), which never end by themselves: a
    # drain at shutdown would wait out Serve's whole graceful timeout (20 s) every time, so it is short
    options = {"num_replicas": 1, "ray_actor_options": actor,
               "max_ongoing_requests": max_ongoing, "health_check_period_s": 2,
               "graceful_shutdown_timeout_s": ROLE_SHUTDOWN_S, "graceful_shutdown_wait_loop_s": 0.5}
    return serve.deployment(cls, name=name, **options).bind(asdict(spec), pcm_scale, name, **extra)


def deploy_replicas(spec: ReplicaSpec, placement: Placement, prefix: str = "vox", max_ongoing: int = 2048,
                    pcm_scale: float = 0.0, extra: dict[str, float] | None = None,
                    schedule_timeout_s: float | None = None,
                    pin: dict[str, dict[str, float]] | None = None,
                    chunk_hold_s: float = CHUNK_HOLD_S) -> dict[str, list[str]]:
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
                extra = {"chunk_hold": chunk_hold_s} if role == "lm" else {}
                app = _role_deployment(LMReplica if role == "lm" else CodecReplica, name, spec, pcm_scale,
                                       max_ongoing, (pin or {}).get(role), **extra)
            run_bounded(lambda app=app, name=name: serve.run(app, name=name, route_prefix=None), name,
                        serve_status, timeout_s=bound)
            names[role].append(name)
    return names


def describe_first(names: dict[str, list[str]]) -> tuple[Any, str]:
    """(ModelSpec, model name) from the first LM or both replica."""
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
