"""Role engines for a disaggregated placement: an LM-only engine and a codec-only engine.

A GPU in a placement (`vox profile --gpus N`) has one of three roles: both (the ordinary `Engine`), LM
only, codec only. The roles are lane plans (`config.role`, lanes.py), which the scheduler wires from the
same parts (engine/scheduler.py): an LM batcher feeding a hand-off sink, or a remote frame source feeding
a codec batcher. The role engines extend the Engine through its public seam only (`prepared`,
`new_stream`, `on_message`, `on_event`, `post`, `watch`, `handle`):

    LMEngine      role=lm: the lm lane alone. When a request's chunk is complete its codes and its playback
                  deadline leave the engine at once, as a `CodeChunk` (the hand-off sink's `HandedOff`
                  event), and the request goes on generating; its KV pages are freed when the LM is done.
    CodecEngine   role=codec: the urgent + background codec lanes, per-request codec slots, the same slack
                  batching and urgency rules as the both engine. Chunks arrive by `feed` (in order, one
                  call per chunk, never per decode step) and are cut by the request's own chunk schedule,
                  which travels with them; a request waits (FIFO) for a free slot.

Something outside moves the chunks: `relay` in one process (tests), Ray Serve across processes and
machines (voxcli/cluster/ray_roles.py). Only plain data crosses: `CodeChunk` pickles.

Codec slot state. What a both engine's prefill binds to a request's codec slot (a Qwen3-TTS voice clone's
reference codes, a CosyVoice 3 voice and codec mode) the LM engine makes as plain data at submit
(`program.codec_binding`; a program refuses there, with InputError, state that cannot travel) and sends with
chunk 0; the codec engine binds it when the request gets its slot, through `program.bind_codec_slot`, the
call that prefill makes, and the program's `release` drops it when the request ends.

Clocks across the hop. Each engine's clock is its own monotonic clock (engine/clock.py), which means nothing
in another process. So every time that crosses the hop travels as wall-clock epoch seconds (`time.time()`),
converted by the sender from its engine clock and by the receiver to its engine clock at receipt
(`EpochClock`). Within one machine every process reads the same system clock: the conversion error is the
gap between the two clock reads (microseconds). Across machines it adds the machines' clock offset, so we
assume NTP (chrony) keeps them within ~1 ms on one LAN (a few ms at worst): a deadline is then wrong by that
much, a small share of the 100 ms urgent margin; unsynchronised clocks would shift every deadline by their
offset, so run NTP on every machine of a placement. What crosses: the request's arrival and TTFA target
(chunk 0's deadline is arrival + target), each chunk's deadline as the LM saw it (for the record), and the
time the chunk left (hop latency). The codec engine computes later chunks' deadlines from its own first
audio (first_audio + start frame x frame seconds): it delivers the audio, so its clock is the one that
counts; `LMEngine.first_audio` hands that time back so the LM's slack keys use it too.

Virtual time. On the virtual-clock sim (`vox profile --gpus N`'s placement prediction) a placement's engines
share one timeline: a co-simulator (voxcli/sim/placement.py) advances them in lockstep, every
engine's clock then reads the same virtual seconds and they ARE the epoch that crosses (`VirtualEpoch`),
and what crosses is posted at a virtual time (`at`), as a Ray message arriving then would be.
"""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from voxcli.config import ChunkSchedule, ConfigError, EngineConfig
from voxcli.engine.engine import Engine
from voxcli.engine.events import Ended, Event, HandedOff
from voxcli.engine.executors.base import Executor
from voxcli.engine.request import Request, RequestState, Timeline
from voxcli.engine.stream import AudioStream, EngineClosed
from voxcli.models.base import ModelProgram, Prompt, Row, SynthesisRequest
from voxcli.sim.cost import CostProfile

# A codec-side request has no prompt of its own; its frame cap is set when the LM's last chunk arrives.
_UNBOUNDED = 1 << 30


@dataclass(frozen=True)
class CodeChunk:
    """One chunk's codes from an LM engine to a codec engine (plain data: it crosses processes)."""

    key: str  # the request across engines (the front door's id)
    index: int  # chunk number within the request
    start: int  # first frame
    codes: np.ndarray  # [frames, codebooks] int64; may be empty for the last chunk (a flush)
    last: bool
    deadline_epoch: float  # its playback deadline as the LM engine saw it (epoch seconds)
    arrival_epoch: float  # when the request arrived (epoch seconds)
    ttfa_target_s: float
    schedule: ChunkSchedule  # the request's chunk schedule (the codec cuts frames by it)
    sent_epoch: float  # when it left the LM engine
    # a later sentence of a user request (`continues=`): its ttfa_target_s runs to the end of the earlier
    # sentences' audio, and its later chunks play after that, not after its own first audio
    continuation: bool = False
    # chunk 0 only: what the request's codec slot must hold besides codes (`ModelProgram.codec_binding`:
    # a voice clone's reference codes, a voice and codec mode), plain picklable data; None on later chunks
    binding: Any = None
    # the request's codec state that grows with it, worst case at its frame cap (the LM knows the prompt:
    # `Prompt.codec_state_*`); the codec engine reserves it with the slot, as a both engine does. 0: none
    state_bytes: int = 0

    @property
    def frames(self) -> int:
        return int(self.codes.shape[0])

    @property
    def nbytes(self) -> int:
        """What the chunk carries: its codes and, on chunk 0, its binding (the fields around: ~0.3 kB)."""
        return int(self.codes.nbytes) + plain_nbytes(self.binding)


def plain_nbytes(value: Any) -> int:
    """Bytes of plain data (a codec binding): arrays' and bytes' own, strings' UTF-8, 8 per number,
    containers and dataclasses summed over what they hold; anything else as pickled."""
    if value is None:
        return 0
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return len(value)
    if isinstance(value, str):
        return len(value.encode())
    if isinstance(value, (bool, int, float, complex, np.generic)):
        return 8
    if isinstance(value, dict):
        return sum(plain_nbytes(k) + plain_nbytes(v) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return sum(plain_nbytes(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(plain_nbytes(getattr(value, f.name)) for f in dataclasses.fields(value))
    import pickle

    return len(pickle.dumps(value))


@dataclass(frozen=True)
class RoleEnd:
    """The last item of an LM engine's code stream: how the request ended there."""

    key: str
    status: str  # done | failed | cancelled | rejected
    reason: str | None


class WatchedStream(AudioStream):
    """An AudioStream that calls `on_change` (on the engine's host thread; it must not block) whenever a
    chunk arrives or the stream ends, so an asyncio consumer needs no thread per stream (it reads with
    `take`)."""

    on_change: Callable[[], None] | None = None

    def deliver(self, chunk: Any) -> None:
        super().deliver(chunk)
        if self.on_change is not None:
            self.on_change()

    def end(self, status: str, reason: str | None, retry_after: float | None = None) -> None:
        super().end(status, reason, retry_after)
        if self.on_change is not None:
            self.on_change()


class EpochClock:
    """Converts between an engine's clock (monotonic seconds) and wall-clock epoch seconds."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now

    def to_epoch(self, t: float) -> float:
        return time.time() - (self._now() - t)

    def from_epoch(self, epoch: float) -> float:
        return self._now() - (time.time() - epoch)

    def now_epoch(self) -> float:
        return time.time()


class VirtualEpoch:
    """The epoch of engines on one shared virtual timeline (the module's "Virtual time"): their clock."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now

    def to_epoch(self, t: float) -> float:
        return t

    def from_epoch(self, epoch: float) -> float:
        return epoch

    def now_epoch(self) -> float:
        return self._now()


def _role_config(config: EngineConfig, role: str) -> EngineConfig:
    if config.role not in ("both", role):
        raise ConfigError(f"an {role} engine was given a config with role={config.role}")
    return config.replace(role=role)


class _RoleEngine(Engine):
    """The Engine with an epoch clock for what crosses roles; it extends the Engine only through its
    public seam (`prepared`, `new_stream`, `on_message`, `on_event`, `post`, `watch`, `handle`)."""

    role = "both"
    takes_text_feed = False  # a role engine's submit has no text_feed: one request per sentence

    def __init__(self, program: ModelProgram, config: EngineConfig, executor: Executor | None = None,
                 profile: CostProfile | None = None) -> None:
        super().__init__(program, _role_config(config, self.role), executor=executor, profile=profile)
        clock = EpochClock if self.realtime else VirtualEpoch
        self.clock: EpochClock | VirtualEpoch = clock(self.executor.now)
        self._keys_lock = threading.Lock()  # the role's own tables (request keys), from any thread


class LMEngine(_RoleEngine):
    """role=lm. `submit(request, key=...)` returns a stream of `CodeChunk`s (then it ends as the request
    did); `sink`, if given, also gets every CodeChunk and finally a `RoleEnd`, on the engine's host thread
    (it must not block: hand the item on, e.g. `CodecEngine.feed`)."""

    role = "lm"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._keys = itertools.count(1)
        self._by_key: dict[str, int] = {}
        self._opening = threading.local()  # submit's key, sink and binding, for new_stream on this thread

    def submit(self, request: SynthesisRequest, at: float | None = None,  # type: ignore[override]
               continues: AudioStream | None = None, key: str | None = None,
               sink: Callable[[CodeChunk | RoleEnd], None] | None = None,
               playback_epoch: float | None = None) -> AudioStream:
        """`playback_epoch`: a later sentence whose earlier sentences' audio plays until then (epoch
        seconds: the front door knows it, in another process); admitted as `continues=` would be."""
        self._opening.value = (key or f"lm-{id(self):x}-{next(self._keys)}", sink)
        playback_from = None if playback_epoch is None else self.clock.from_epoch(playback_epoch)
        self._opening.binding = None
        try:
            return super().submit(request, at=at, continues=continues, playback_from=playback_from)
        finally:
            self._opening.value = self._opening.binding = None

    def prepared(self, request: SynthesisRequest, prompt: Prompt) -> None:
        # the codec slot's state as plain data, made now: a request whose state cannot leave this process
        # is refused here (the program's InputError), before any LM work, never decoded without it
        self._opening.binding = self.program.codec_binding(prompt)

    def new_stream(self, rid: int, request: SynthesisRequest) -> AudioStream:
        stream = super().new_stream(rid, request)
        key, sink = self._opening.value
        stream.key, stream.sink = key, sink  # type: ignore[attr-defined]
        stream.binding = self._opening.binding  # type: ignore[attr-defined]  # sent with chunk 0, then dropped
        with self._keys_lock:
            self._by_key[key] = rid
        return stream

    def first_audio(self, key: str, epoch: float, at: float | None = None) -> None:
        """The codec delivered the request's first audio at `epoch`: later chunks' deadlines follow it."""
        self.post("first_audio", (key, epoch), at)

    def on_message(self, kind: str, payload: Any, now: float) -> None:
        if kind != "first_audio":
            return super().on_message(kind, payload, now)
        key, epoch = payload
        with self._keys_lock:
            rid = self._by_key.get(key)
        r = self.scheduler.requests.get(rid) if rid is not None else None
        if r is not None and r.t_first_audio is None:
            r.t_first_audio = self.clock.from_epoch(epoch)

    def on_event(self, ev: Event) -> None:
        if isinstance(ev, HandedOff):  # (no stream of this engine takes it: the codes leave here)
            self._hand_off(ev)
        elif isinstance(ev, Ended):
            stream = ev.request.user
            with self._keys_lock:
                self._by_key.pop(stream.key, None)
            if stream.sink is not None:
                stream.sink(RoleEnd(stream.key, ev.request.state.value, ev.request.reason))

    def _hand_off(self, ev: HandedOff) -> None:
        r, ch, stream = ev.request, ev.chunk, ev.request.user
        to_epoch = self.clock.to_epoch
        item = CodeChunk(key=stream.key, index=ch.index, start=ch.start, codes=ev.codes, last=ch.last,
                         deadline_epoch=to_epoch(ch.deadline), arrival_epoch=to_epoch(r.arrival),
                         ttfa_target_s=r.ttfa_target, schedule=r.schedule, sent_epoch=self.clock.now_epoch(),
                         continuation=r.continuation, binding=stream.binding if ch.index == 0 else None,
                         state_bytes=r.state_bytes)
        if ch.index == 0:
            stream.binding = None
        stream.deliver(item)  # type: ignore[arg-type]
        if stream.sink is not None:
            stream.sink(item)


class CodecEngine(_RoleEngine):
    """role=codec. `feed(chunk)` hands it a request's next chunk (chunk 0 opens the request); `attach(key)`
    returns the request's AudioStream (before or after its first chunk); `abort(key, reason)` fails it
    (its LM is gone). A stream's cancel frees the slot here only: cancelling the LM is the caller's."""

    role = "codec"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._by_key: dict[str, AudioStream] = {}
        self._key_of: dict[int, str] = {}
        self._rids = itertools.count(1)
        self.on_end: Callable[[str, str, str | None], None] | None = None  # (key, status, reason)
        self.scheduler.bind_slots_with(self._bind_slot)

    def _bind_slot(self, r: Request) -> None:
        """The request got codec slot `r.slot` (scheduler, host thread): give it the state its LM engine
        sent with chunk 0, through the program call a both engine's prefill makes. Its row makes the
        engine call `program.release` when the request ends, which drops that state."""
        stream = r.user
        binding, stream.binding = getattr(stream, "binding", None), None
        row = Row(request_id=r.id, prompt=r.prompt, pages=[], slot=r.slot)
        try:
            self.program.bind_codec_slot(r.slot, binding)
        except BaseException:
            # drop what it half bound now: the scheduler ends the request and may hand its slot to the next
            # one before the engine sees the end, whose release must not clear that request's state
            self.program.release(row)
            raise
        r.row = row

    def attach(self, key: str) -> WatchedStream:
        with self._keys_lock:
            stream = self._by_key.get(key)
            if stream is None:
                rid = -next(self._rids)  # never an Engine.submit id (those count up from 1)
                stream = WatchedStream(rid, key, self.spec.sample_rate, Timeline(rid, name=key), self.cancel)
                self.watch(rid, stream)  # (raises EngineClosed after close)
                self._by_key[key] = stream
                self._key_of[rid] = key
            return stream  # type: ignore[return-value]

    def feed(self, chunk: CodeChunk, at: float | None = None) -> AudioStream:
        """Queue a chunk (thread-safe, returns at once). Chunks of a request must come in order. A later
        chunk of a request this engine does not hold (it ended here, or the engine was restarted) raises.
        `at`: virtual time only, when the chunk arrives."""
        if chunk.index > 0:
            with self._keys_lock:
                known = chunk.key in self._by_key
            if not known:
                raise LookupError(f"chunk {chunk.index} of {chunk.key}: this codec engine holds no such "
                                  "request (it ended here, or the replica restarted)")
        stream = self.attach(chunk.key)
        self.post("feed", (stream, chunk), at)
        return stream

    def abort(self, key: str, reason: str, at: float | None = None) -> None:
        with self._keys_lock:
            stream = self._by_key.get(key)
        if stream is not None:
            self.post("abort", (stream.request_id, reason), at)

    def holds(self, key: str) -> bool:
        """Whether request `key` is here (attached or open, not ended)."""
        with self._keys_lock:
            return key in self._by_key

    def room(self) -> int:
        """Codec slots free less requests waiting for one (the front door's 'most room')."""
        sched = self.scheduler
        return sched.slots.free - len(sched.waiting)

    def on_message(self, kind: str, payload: Any, now: float) -> None:
        if kind == "feed":
            stream, chunk = payload
            self._feed(stream, chunk, now)
        elif kind == "abort":
            rid, reason = payload
            if not self._end_unopened(rid, "failed", reason):
                self.handle(self.scheduler.fail(rid, now, reason))
        elif kind == "cancel_unopened":
            self._end_unopened(payload, "cancelled", "cancelled by the user")
        else:
            super().on_message(kind, payload, now)

    def _end_unopened(self, rid: int, status: str, reason: str) -> bool:
        """End a request whose first chunk never came (it holds nothing here); False if it is open."""
        if rid in self.scheduler.requests:
            return False
        stream = self.unwatch(rid)
        with self._keys_lock:
            key = self._key_of.pop(rid, None)
            if key is not None:
                self._by_key.pop(key, None)
        if stream is not None:
            stream.end(status, reason)
            if key is not None and self.on_end is not None:
                self.on_end(key, status, reason)
        return True

    def _feed(self, stream: AudioStream, chunk: CodeChunk, now: float) -> None:
        sched = self.scheduler
        rid = stream.request_id
        r = sched.requests.get(rid)
        if r is None:
            if chunk.index != 0 or stream.finished:
                return  # its request ended here already (cancelled, failed): the rest is dropped
            r = Request(rid, Prompt(length=0, data=None, max_frames=_UNBOUNDED), self.clock.from_epoch(
                chunk.arrival_epoch), chunk.schedule, self.spec.frame_seconds, chunk.ttfa_target_s,
                None, stream, self.spec.codec_lookahead_frames)
            r.frame_cap = _UNBOUNDED
            r.state_bytes = chunk.state_bytes  # reserved with its slot (remote_source.py)
            r.continuation = chunk.continuation  # chunk 0's deadline (arrival + target) is the playback end
            r.refresh_event()
            stream.timeline = r.timeline
            stream.binding = chunk.binding  # type: ignore[attr-defined]  # bound when it gets a slot
            r.timeline.name = chunk.key
            self.timelines.append(r.timeline)
            self.handle(sched.open_remote(r, now) + sched.take_unreported())
        if r.n_frames != chunk.start:
            self.handle(sched.fail(rid, now, f"internal error: chunk {chunk.index} of {chunk.key} starts at "
                                              f"frame {chunk.start}, expected {r.n_frames}"))
            return
        self.handle(sched.feed_remote(r, chunk.codes, chunk.last, now))

    def on_event(self, ev: Event) -> None:
        if isinstance(ev, Ended):  # the front door learns of the end (after the stream did)
            with self._keys_lock:
                key = self._key_of.pop(ev.request.id, None)
                if key is not None:
                    self._by_key.pop(key, None)
            if key is not None and self.on_end is not None:
                self.on_end(key, ev.request.state.value, ev.request.reason)

    def cancel(self, request_id: int, at: float | None = None) -> None:
        super().cancel(request_id, at)
        # a request that never got its first chunk is not in the scheduler: end its stream here
        try:
            self.post("cancel_unopened", request_id)
        except EngineClosed:
            pass  # closing ends every stream anyway


def relay(items: Iterable[CodeChunk | RoleEnd], codec: CodecEngine, lm_cancel: Callable[[], None]) -> None:
    """Move one request's chunks from its LM engine's stream to its codec engine, in order (one process).
    The LM's failure ends the codec side with the LM's reason; the codec's end cancels the LM."""
    try:
        for item in items:
            if isinstance(item, RoleEnd):
                if item.status != "done":
                    codec.abort(item.key, f"the LM engine ended the request: {item.status} ({item.reason})")
                return
            try:
                codec.feed(item)
            except LookupError:  # the codec side ended the request (cancelled, failed): stop the LM too
                lm_cancel()
                return
    except BaseException:
        lm_cancel()
        raise


def lm_items(stream: AudioStream) -> Iterator[CodeChunk | RoleEnd]:
    """An LM engine's stream as relay items: its CodeChunks, then a RoleEnd saying how it ended."""
    try:
        yield from stream  # type: ignore[misc]
    except Exception as e:  # noqa: BLE001 - a failure is an item: the codec side gets its reason
        yield RoleEnd(stream.key, stream.status, str(e))  # type: ignore[attr-defined]
        return
    yield RoleEnd(stream.key, stream.status, stream.reason)  # type: ignore[attr-defined]


__all__ = ["CodeChunk", "RoleEnd", "EpochClock", "VirtualEpoch", "WatchedStream", "LMEngine", "CodecEngine",
           "relay", "lm_items", "plain_nbytes", "RequestState"]
