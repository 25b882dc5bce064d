"""The engine: requests in, audio streams out.

    engine = Engine(program, config)            # or Engine.from_config(config)
    stream = engine.submit(SynthesisRequest(text="Hello"))
    for chunk in stream: ...                    # AudioChunk(pcm, sample_rate, index, t_delivered, ...)
    engine.close()                              # or `with Engine(...) as engine:`

Chunk schedule: `config.chunk` when a recipe or override set it, else the model's `spec.chunk`
(`engine.config` holds the schedule in effect).

Real-clock executors (cpu, cuda): one host thread runs the loop (decide -> launch -> wait -> complete);
`submit`, `cancel` and `close` are thread-safe and may be called from any number of threads.
`submit` runs `program.prepare` (and the request's KV planning) for the caller, on a worker with a
deadline (engine/prepare_guard.py: a preparation that never ends fails that request alone, never the
loop), so a bad request raises `InputError` right there with the model's message. A refusal (queue
full, request larger than the KV pool) is decided on the host thread and fails the stream: iterating it
or `wait()` raises `RequestRejected(reason)`.

Virtual time (sim executor): nothing runs in the background. `submit(request, at=t)` schedules an
arrival at virtual time t, `cancel(id, at=t)` a cancel, and `run(until=None)` drives the loop until
every submitted request has finished (or until time t). Streams pump `run()` themselves when read.

An exception inside a stage fails only the requests whose own data caused it (the batch's rows are
re-run in parts on the same state to find them: engine/isolation.py, the contract in models/base.py);
an error that is not a row's (a device fault, one every row raises alone) fails that batch's requests
with the stage's message, and nothing else. A bug in the loop itself fails every open stream with the
reason and closes the engine.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
import warnings
from collections import deque
from collections.abc import Iterable
from typing import Any

from voxcli.config import ChunkSchedule, ConfigError, EngineConfig, resolve_auto
from voxcli.engine import sentences
from voxcli.engine.admission_check import check_request
from voxcli.engine.estimates import LatencyEstimator, load_profile
from voxcli.engine.events import Delivered, Ended, Event, Released
from voxcli.engine.executors.base import Completion, Executor
from voxcli.engine.lanes import LaneLayout, lane_layout
from voxcli.engine.load import EngineLoad
from voxcli.engine.memory_plan import apply_memory_plan
from voxcli.engine.prepare_guard import PrepareClosed, PrepareGuard
from voxcli.engine.request import Request, Timeline
from voxcli.engine.scheduler import Scheduler
from voxcli.engine.stream import (
    AudioChunk,
    AudioStream,
    EngineClosed,
    EngineError,
    RequestCancelled,
    RequestFailed,
    RequestRejected,
)
from voxcli.models.base import InputError, ModelProgram, Prompt, ResourceLimits, SynthesisRequest
from voxcli.models.text_feed import TextFeed
from voxcli.sim.cost import CostProfile

__all__ = ["Engine", "AudioStream", "AudioChunk", "Timeline", "EngineError", "EngineClosed", "RequestFailed",
           "RequestRejected", "RequestCancelled", "make_executor"]


TIMELINE_HISTORY = 10_000


def make_executor(config: EngineConfig, program: ModelProgram, profile: CostProfile,
                  layout: LaneLayout) -> Executor:
    if config.executor == "sim":
        from voxcli.sim.executor import SimExecutor

        try:
            model = profile.sim_model(config.sim_model)
        except ValueError as e:
            raise ConfigError(str(e)) from e
        return SimExecutor(program, profile, layout, model=model, seed=config.seed)
    if config.executor == "cpu":
        from voxcli.engine.executors.cpu import CpuExecutor

        return CpuExecutor(program, layout, threads=config.threads)
    try:
        from voxcli.engine.executors.cuda import CudaExecutor  # type: ignore[import-not-found]
    except ImportError as e:
        raise ConfigError(f"the cuda executor is not available in this install ({e}); use executor=cpu "
                          f"or executor=sim") from e
    # The cuda executor reads the same lane plan as the scheduler and measures its own costs.
    return CudaExecutor(program=program, config=config, layout=layout)


def resource_limits(config: EngineConfig, model_chunk: ChunkSchedule | None = None) -> ResourceLimits:
    """The engine's bounds for the program's fixed-shape buffers: a row holds at most a prefill batch's
    worth of prompt (max_prefill_tokens) plus the frame cap plus the step's own position, and never more
    than the KV pool; chunks are at most the largest chunk of the schedule in force (the config's, else
    the model's)."""
    pool = config.kv_pages * config.kv_page_size
    chunk = config.chunk if config.chunk is not None else model_chunk
    if chunk is None:
        raise ValueError("resource_limits needs a chunk schedule: the config's or the model's")
    return ResourceLimits(max_kv_tokens_per_row=min(pool, config.max_prefill_tokens + config.max_frames + 1),
                          max_chunk_frames=max(chunk.first, *chunk.ramp, chunk.steady))


class Engine:
    # `submit` takes `text_feed=` (voxcli/speech_engine.py's SpeechEngine): a role engine does not
    takes_text_feed = True

    def __init__(self, program: ModelProgram, config: EngineConfig, executor: Executor | None = None,
                 profile: CostProfile | None = None) -> None:
        config.validate()
        if config.device == "auto":  # "auto" follows the loaded program (a host-only program: cpu)
            config = config.replace(device=str(getattr(program, "device", None) or "cpu"))
        config = resolve_auto(config, check=False)
        if config.chunk is None:  # no recipe/--set schedule: the model's own applies
            config = config.replace(chunk=program.spec.chunk)
        self.program = program
        self.config = config
        self.layout = lane_layout(config)
        self.profile = profile or load_profile(config)
        self.estimator = LatencyEstimator(self.profile, config, self.layout)
        # Size the pools from the memory left after the weights, before anything is allocated.
        config, self.memory_plan = apply_memory_plan(program, config)
        self.config = config
        # Device buffers first: a graph-capturing executor (cuda) records stages over them at startup.
        program.set_limits(resource_limits(config))
        try:
            # a role engine allocates only its role's pool (the memory plan gave it the other's memory)
            if config.role != "codec":
                program.init_kv(config.kv_pages, config.kv_page_size)
            if config.role != "lm":
                program.init_codec_slots(config.codec_slots)
        except (MemoryError, RuntimeError) as e:  # torch reports a failed allocation as RuntimeError
            raise ConfigError(f"the KV pool (kv_pages={config.kv_pages} x kv_page_size="
                              f"{config.kv_page_size}) or the codec slots (codec_slots={config.codec_slots}) "
                              f"do not fit in memory ({str(e).splitlines()[0][:120]}); lower them") from None
        self.executor = executor or make_executor(config, program, self.profile, self.layout)
        self.realtime: bool = getattr(self.executor, "realtime", True)
        # a request's preparation runs off the engine loop, with a deadline (engine/prepare_guard.py)
        self.prepare_guard = PrepareGuard(config.prepare_limit_s, inline=not self.realtime)
        self.scheduler = Scheduler(config, program.spec, self.estimator, program.kv_tokens, self.layout)
        self.spec = program.spec
        self._ids = itertools.count(1)
        self._streams: dict[int, AudioStream] = {}
        self._awaiting: dict[int, Request] = {}  # fed requests whose first word has not arrived
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._inbox: list[tuple[str, Any]] = []
        self._arrivals: list[tuple[float, int, str, Any]] = []  # virtual time: (t, seq, kind, payload)
        self._seq = itertools.count()
        self._closed = False
        self._dead: str | None = None
        # the latest submitted requests' timelines, in submission order; bounded, so an engine that runs
        # for days (a server, a long batch) does not keep every request it ever served
        self.timelines: deque[Timeline] = deque(maxlen=TIMELINE_HISTORY)
        self._thread: threading.Thread | None = None
        if self.realtime:
            self._thread = threading.Thread(target=self._host_loop, name="vox-engine", daemon=True)
            self._thread.start()

    @classmethod
    def from_config(cls, config: EngineConfig) -> Engine:
        config = resolve_auto(config)
        if config.executor == "sim":
            from voxcli.sim.synthetic import SyntheticProgram

            program: ModelProgram = SyntheticProgram.for_model(config.model)
        else:
            from voxcli.models import load_model  # type: ignore[attr-defined]

            program = load_model(config.model, config.device, config.dtype)
        return cls(program, config)

    # ------------------------------------------------------------------ public API
    def submit(self, request: SynthesisRequest, at: float | None = None,
               continues: AudioStream | None = None, playback_from: float | None = None,
               text_feed: TextFeed | None = None) -> AudioStream:
        """Queue a request; returns its stream at once. Raises InputError (from the model) for a bad
        request, EngineClosed after close(). `at` (virtual time only) schedules the arrival.

        `continues`: the stream of the previous sentence of the same user request (voxcli/speak.py).
        Admission decides once per user request: a continuation is never refused for load (queue
        full, predicted TTFA), it is queued ahead of new requests, and its first chunk's deadline is
        the end of the audio already delivered for the user request (when playback would stall).
        `playback_from` (engine clock): that end given directly, for a previous sentence whose stream
        lives elsewhere (a placement's front door: engine/roles.py).

        `text_feed`: the request's text is still arriving (models/text_feed.py), for a model whose spec
        `streams_text`; `request.text` is ignored. The request arrives (its TTFA and first-chunk deadline
        count from then, admission sees it then) when the feed's first word does; until then it holds
        nothing but its stream. A cancel before that ends it at once."""
        if text_feed is not None:
            if not self.spec.streams_text:
                raise InputError(f"model {self.spec.name} reads each text whole; send the whole text (only "
                                 f"a model that reads text as it arrives, such as Kyutai TTS, takes a feed)")
            if continues is not None or playback_from is not None:
                raise ValueError("a request fed its text as it arrives is one request, never a continuation")
        if self._closed:
            raise EngineClosed(self._dead or "the engine is closed")
        if at is not None and self.realtime:
            raise ValueError("submit(at=...) schedules virtual time; it needs the sim executor")
        arrival = self.executor.now() if at is None else float(at)
        # per request, before it can share (and fail) a batch: the shared fields and the family's options
        check_request(request, self.program.option_schema, f"model {self.spec.name}")
        try:
            prompt = self._prepare(request) if text_feed is None else self._prepare(request, text_feed)
            self.prepared(request, prompt)
            # its KV need is planned here too, not on the engine loop (the loop only reads the number)
            kv_tokens = self.prepare_guard.run(lambda: self.program.kv_tokens(prompt), "planning the request")
        except PrepareClosed:
            raise EngineClosed(self._dead or "the engine is closed") from None
        with self._lock:
            rid = next(self._ids)
        stream = self.new_stream(rid, request)
        r = self.scheduler.new_request(rid, prompt, arrival, request, stream)
        r.need_pages = self.scheduler.kv.pages_for(kv_tokens)
        r.text_feed = text_feed
        stream.timeline = r.timeline
        sentences.chain(r, stream, continues, playback_from)
        with self._wake:
            if self._closed:
                raise EngineClosed(self._dead or "the engine is closed")
            self._streams[rid] = stream
            self.timelines.append(r.timeline)
            if text_feed is not None and not text_feed.bind(self.executor.now,
                                                         lambda: self._text_started(r, text_feed)):
                self._awaiting[rid] = r  # it arrives with its first word (_text_started)
                return stream
            if self.realtime:
                self._inbox.append(("add", r))
                self._wake.notify_all()
            else:
                heapq.heappush(self._arrivals, (arrival, next(self._seq), "add", r))
        if self.realtime:
            self._interrupt()
        return stream

    def _text_started(self, r: Request, feed: TextFeed) -> None:
        """A fed request's first word arrived (or its text ended with none): on the writer's thread."""
        with self._wake:
            if self._awaiting.pop(r.id, None) is None or self._closed:
                return  # cancelled or closed meanwhile
            now = self.executor.now()
            if not feed.has_words:  # it holds nothing yet: ended here, never seen by the scheduler
                self._end_unadmitted(r, "failed", "the text ended before any words arrived; send some "
                                                  "words to say", now)
                return
            r.arrival = r.timeline.arrival = now
            if self.realtime:
                self._inbox.append(("add", r))
                self._wake.notify_all()
            else:
                heapq.heappush(self._arrivals, (now, next(self._seq), "add", r))
        if self.realtime:
            self._interrupt()

    def _end_unadmitted(self, r: Request, status: str, reason: str, now: float) -> None:
        """End a fed request still waiting for its first word (it holds no pages, slot or row). Under
        the lock."""
        tl = r.timeline
        tl.status, tl.reason, tl.finished = status, reason, now
        r.user.end(status, reason)
        self._streams.pop(r.id, None)

    # ------------------------------------------------------------------ the seam for role engines (roles.py)
    def prepared(self, request: SynthesisRequest, prompt: Prompt) -> None:
        """`submit` made `prompt` (on the caller's thread): a role engine adds what crosses to the other role
        here, and refuses the request by raising InputError. Nothing to add here."""

    def new_stream(self, rid: int, request: SynthesisRequest) -> AudioStream:
        """The stream `submit` hands back (a role engine's carries more: engine/roles.py)."""
        pump = None if self.realtime else self._pump
        return AudioStream(rid, request.request_id, self.spec.sample_rate, Timeline(rid), self.cancel, pump)

    def cancel(self, request_id: int, at: float | None = None) -> None:
        """Cancel a request (idempotent; unknown or finished ids are ignored)."""
        with self._wake:
            waiting = self._awaiting.pop(request_id, None)
            if waiting is not None:  # a fed request whose first word has not arrived
                self._end_unadmitted(waiting, "cancelled", "cancelled by the user", self.executor.now())
                return
        if self.realtime:
            with self._wake:
                self._inbox.append(("cancel", request_id))
                self._wake.notify_all()
            self._interrupt()
            return
        t = self.executor.now() if at is None else float(at)
        heapq.heappush(self._arrivals, (t, next(self._seq), "cancel", request_id))

    def run(self, until: float | None = None) -> None:
        """Virtual time: drive the loop until every submitted request has finished (or until `until`)."""
        if self.realtime:
            raise RuntimeError("run() drives virtual time; a real-clock engine runs on its own thread")
        if self._dead:
            raise EngineClosed(self._dead)
        try:
            self._run_virtual(until)
        except Exception as e:
            self._die(f"engine loop failed: {type(e).__name__}: {e}")
            raise

    def load(self) -> EngineLoad:
        """What the engine holds now: open, waiting, decoding requests, KV pages, codec slots, late-chunk
        counters (engine/load.py). Safe from any thread; from another than the host loop, approximate."""
        return self.scheduler.load()

    @property
    def closed(self) -> bool:
        """Closed by `close()`, or dead (its host loop failed: `dead` says why)."""
        return self._closed

    @property
    def dead(self) -> str | None:
        """Why the engine's host loop died (every later call raises EngineClosed with it); None if alive."""
        return self._dead

    def close(self) -> None:
        with self._wake:
            if self._closed and self._thread is None:
                return
            self._closed = True
            self._awaiting.clear()  # their streams end with the others' (_fail_open)
            self._wake.notify_all()
        self.prepare_guard.close()  # a submitter waiting on a preparation is released now, not at its limit
        self._interrupt()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None
        self._drain()
        self._fail_open("cancelled", "the engine was closed")
        self.executor.close()

    def _drain(self, timeout_s: float = 30.0) -> None:
        """Give back everything open requests hold: let the batches in flight finish (nothing may still
        write into a page, slot or row state we return), then end every open request, so its KV pages,
        codec slot and the program's per-row state (a voice clone's reference codes) are released. A
        new Engine on the same program then starts from a clean program."""
        ex = self.executor
        try:
            give_up = ex.now() + timeout_s if self.realtime else None
            while self._in_flight():
                if give_up is not None and ex.now() >= give_up:
                    warnings.warn("engine.close(): a batch is still running; its requests keep their "
                                  "resources", stacklevel=2)
                    break
                self._complete(ex.wait(give_up))
            self.handle(self.scheduler.close(ex.now(), "the engine was closed"))
        except Exception as e:  # noqa: BLE001 - closing must never raise; report what was kept
            warnings.warn(f"engine.close() could not release every request: {type(e).__name__}: {e}",
                          stacklevel=2)

    def _prepare(self, request: SynthesisRequest, text_feed: TextFeed | None = None) -> Prompt:
        """The program's prompt for `request` (a role engine adds what crosses to the other role), made on
        a worker with a deadline: a preparation that never ends fails this request alone."""
        if text_feed is not None:  # a program whose spec streams_text takes the feed (models/base.py)
            prepare: Any = self.program.prepare
            return self.prepare_guard.run(lambda: prepare(request, feed=text_feed))
        return self.prepare_guard.run(lambda: self.program.prepare(request))

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def now(self) -> float:
        return self.executor.now()

    # ------------------------------------------------------------------ the loop
    def _step(self, now: float) -> None:
        free = [lane for lane in self.layout.lanes if not self.executor.busy(lane)]
        if free:
            sched = self.scheduler
            for work in sched.decide(now, free):
                self.executor.launch(work)
            unreported = sched.take_unreported()  # requests a decision ended (a codec engine's slot binding)
            if unreported:
                self.handle(unreported)

    def _in_flight(self) -> bool:
        return any(self.executor.busy(lane) for lane in self.layout.lanes)

    def _complete(self, completions: Iterable[Completion]) -> None:
        for c in completions:
            if self.realtime and c.error is None and not c.reruns:  # an isolated batch ran several times
                self.estimator.observe(c.work, c.finished - c.started)
            self.handle(self.scheduler.complete(c))

    def on_message(self, kind: str, payload: Any, now: float) -> None:
        """A message `post`ed with a kind other than the engine's own (add, cancel), on the host thread: a
        role engine's (engine/roles.py). None here."""
        raise ValueError(f"unknown engine message {kind!r}")

    def on_event(self, ev: Event) -> None:
        """After `handle` fed the streams from `ev` (host thread): a role engine acts on it too
        (`HandedOff`, which no stream here takes; the other role learns of an end). Nothing more here."""

    def post(self, kind: str, payload: Any, at: float | None = None) -> None:
        """Hand the engine loop a message (thread-safe; raises EngineClosed after close): "add" a
        request, "cancel" an id, any other kind goes to `on_message`. `at`: virtual time only, when it
        arrives (a message in flight); default now."""
        with self._wake:
            if self._closed:
                raise EngineClosed(self._dead or "the engine is closed")
            if self.realtime:
                self._inbox.append((kind, payload))
                self._wake.notify_all()
            else:
                when = self.executor.now() if at is None else max(float(at), self.executor.now())
                heapq.heappush(self._arrivals, (when, next(self._seq), kind, payload))
        if self.realtime:
            self._interrupt()

    def watch(self, rid: int, stream: AudioStream) -> None:
        """Keep a stream the engine did not make in `submit` (a role engine's): it ends when the engine
        closes or dies. Raises EngineClosed after close."""
        with self._lock:
            if self._closed:
                raise EngineClosed(self._dead or "the engine is closed")
            self._streams[rid] = stream

    def unwatch(self, rid: int) -> AudioStream | None:
        """Stop keeping a stream (its request ended outside the scheduler); the stream, if it was kept."""
        with self._lock:
            return self._streams.pop(rid, None)

    def handle(self, events: list[Event]) -> None:
        """Feed the streams from the scheduler's events (host thread), then `on_event` each."""
        for ev in events:
            stream: AudioStream = ev.request.user
            if isinstance(ev, Delivered):
                ch = ev.chunk
                # where its PCM starts in the request's audio: a hold-back codec's later chunks begin with
                # the samples the chunk before kept back (request.py)
                stream.deliver(AudioChunk(ev.pcm, self.spec.sample_rate, ch.index, ev.t,
                                        ev.request.audio_start_s(ch.start), ch.last))
            elif isinstance(ev, Ended):
                stream.end(ev.request.state.value, ev.request.reason, ev.request.retry_after)
                with self._lock:
                    self._streams.pop(ev.request.id, None)
            elif isinstance(ev, Released) and ev.request.row is not None:
                try:
                    self.program.release(ev.request.row)
                except Exception as e:  # a release hook must not take the engine down
                    warnings.warn(f"program.release failed for request {ev.request.id}: {e}", stacklevel=1)
            self.on_event(ev)

    def _admit(self, kind: str, payload: Any, now: float) -> None:
        if kind == "add":
            self.handle(self.scheduler.add(payload, now))
        elif kind != "cancel":
            self.on_message(kind, payload, now)
        else:
            self.handle(self.scheduler.cancel(payload, now))
            # a request that has not arrived yet (virtual time) is cancelled where it waits
            for i, item in enumerate(self._arrivals):
                if item[2] == "add" and item[3].id == payload:
                    r: Request = item[3]
                    self._arrivals.pop(i)
                    heapq.heapify(self._arrivals)
                    self.handle(self.scheduler.cancel_unarrived(r, now))
                    break

    def _run_virtual(self, until: float | None) -> None:
        ex, sched = self.executor, self.scheduler
        # the sim may charge host time per scheduler call (its model says whether and how much)
        charge = getattr(ex, "charge_host", None)
        if charge is not None and getattr(getattr(ex, "model", None), "host", "free") == "free":
            charge = None
        clock = time.thread_time
        while True:
            now = ex.now()
            while self._arrivals and self._arrivals[0][0] <= now:
                _, _, kind, payload = heapq.heappop(self._arrivals)
                if charge is None:
                    self._admit(kind, payload, now)
                else:
                    t0 = clock()
                    self._admit(kind, payload, now)
                    charge(clock() - t0, 0)
            if until is not None and now >= until:
                return
            if charge is None:
                self._step(now)
            else:
                self._step_charged(now, charge, clock)
            arrival = self._arrivals[0][0] if self._arrivals else None
            wake = [t for t in (sched.next_timer(now), arrival, until) if t is not None]
            if not self._in_flight() and not wake:
                if sched.idle:
                    return
                raise RuntimeError(f"engine stalled at t={now:.6f}: {len(sched.requests)} requests open, "
                                   f"nothing in flight and no timer (a scheduler bug)")
            completions = ex.wait(min(wake) if wake else None)
            if charge is None:
                self._complete(completions)
            else:
                for c in completions:
                    t0 = clock()
                    self._complete((c,))
                    charge(clock() - t0, len(c.work.rows))

    def _step_charged(self, now: float, charge: Any, clock: Any) -> None:
        """`_step` on the sim with host time: the batches launch once the decision is made."""
        free = [lane for lane in self.layout.lanes if not self.executor.busy(lane)]
        if not free:
            return
        t0 = clock()
        works = self.scheduler.decide(now, free)
        charge(clock() - t0, sum(len(w.rows) for w in works))
        for work in works:
            self.executor.launch(work)

    def _pump(self) -> None:
        self.run()

    def _interrupt(self) -> None:
        interrupt = getattr(self.executor, "interrupt", None)
        if interrupt is not None:
            interrupt()

    def _host_loop(self) -> None:
        try:
            self._host_loop_inner()
        except Exception as e:  # a bug in the loop: fail everything loudly, never hang the callers
            self._die(f"engine loop failed: {type(e).__name__}: {e}")

    def _host_loop_inner(self) -> None:
        ex, sched = self.executor, self.scheduler
        while True:
            with self._wake:
                inbox, self._inbox = self._inbox, []
                closing = self._closed
            if closing:
                return
            now = ex.now()
            for kind, payload in inbox:
                self._admit(kind, payload, now)
            self._step(now)
            timer = sched.next_timer(now)
            if not self._in_flight() and timer is None:
                with self._wake:  # nothing to do until someone submits, cancels or closes
                    self._wake.wait_for(lambda: bool(self._inbox) or self._closed)
                continue
            self._complete(ex.wait(timer))

    def _die(self, reason: str) -> None:
        self._dead = reason
        self._closed = True
        self._fail_open("failed", reason)

    def _fail_open(self, status: str, reason: str) -> None:
        with self._lock:
            streams = list(self._streams.values())
            self._streams.clear()
        for s in streams:
            s.end(status, reason)
