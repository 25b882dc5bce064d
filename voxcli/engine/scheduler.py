"""The scheduler: a pure policy object. No threads, no sleeping, no clock of its own.

The engine drives it with times from its executor's clock:

    add(request, now)            a prepared request arrives (queued, or rejected with a reason)
    cancel(request_id, now)      the user gives up on a request
    decide(now, free_lanes)      -> list[Work]: what each free lane runs next
    complete(completion)         a batch finished (or failed): frames, chunks, deliveries
    next_timer(now)              the earliest time a waiting decision could change without a completion

Errors: a completion with an error fails every request of its batch (the executors have already re-run
the batch in parts to find the rows responsible, engine/isolation.py, so an error here is not a row's).
A result may hold an exception object in place of one row's result (StepOutput or PCM), put there by
isolation or by the program: then only that request fails and the rest of the batch goes on.

Every method returns what happened as events (engine/events.py: `Delivered`, `Ended`, `Released`,
`HandedOff`) so the engine can feed its audio streams; the scheduler never calls the model or the user.
Same inputs at the same times give the same decisions: all orderings use stable keys (deadline, request
id), never dict order of floats or object identity.

The scheduler is thin: it builds its parts, each a class that owns its data and is tested alone
(tests/test_scheduler_parts.py), wires them for the engine's role, and hands `(lm, codec)` to the lane
policy. Parts talk through small public methods, never through each other's fields:

    request_book.py     RequestBook: every open request and the fed ones; endings -> events (`Ended`,
                        `Released`), taking a request out of every part that holds it
    lm_batcher.py       LmBatcher: the queue, running rows and row counts, the KV page pool, the next LM
                        batch, and its results: the decode hot path (the frame log, frame_log.py, and
                        its due-step index), frames into chunks
    codec_batcher.py    CodecBatcher: the pending chunks (pending.py), the codec slot table, the urgent
                        and background lanes with slack batching and their counters, deliveries
    handoff.py          HandOffSink: where an LM-only engine's chunks go (they leave it at once)
    remote_source.py    RemoteFrameSource: a codec-only engine's requests, whose frames arrive by chunk
    chunk_sink.py       the seam between them: a `ChunkSink` takes chunks, a `FrameSource` gives frames
    sentences.py        a later sentence of a user request (continuations)

The wiring is the role (config.role, lanes.py): both = an LM batcher feeding a codec batcher; LM only =
an LM batcher feeding a hand-off sink; codec only = a remote frame source feeding a codec batcher.

The decisions are the policies' (objects picked by name from registries, never by comparing names
here): lane_policies.py says which lane runs what (full, lanes, sync2, sync), admission_policies.py
when a request may start and whether it is taken (prefill-first, deadline, ttfa-gate); the admission
policy reads the scheduler as `SchedulerView` (admission.py), the public properties below. A request's
next chunk becomes dispatchable only after its previous chunk has been delivered.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from voxcli.config import EngineConfig
from voxcli.engine import sentences, text_pacing
from voxcli.engine.admission_policies import admission_policy
from voxcli.engine.codec_batcher import CodecBatcher
from voxcli.engine.codec_slots import CodecSlotTable
from voxcli.engine.estimates import LatencyEstimator
from voxcli.engine.events import Delivered, Ended, Event, HandedOff, Released
from voxcli.engine.executors.base import Completion, Work
from voxcli.engine.handoff import HandOffSink
from voxcli.engine.kv_cache import KVPagePool
from voxcli.engine.lane_policies import CodecLanes, LmLane, NoLane, lane_policy
from voxcli.engine.lanes import LaneLayout, lane_layout
from voxcli.engine.lm_batcher import LmBatcher
from voxcli.engine.load import NO_LATE_CHUNKS, EngineLoad
from voxcli.engine.pending import PendingChunks
from voxcli.engine.remote_source import RemoteFrameSource
from voxcli.engine.request import Chunk, Request, RequestState
from voxcli.engine.request_book import RequestBook
from voxcli.models.base import ModelSpec, Prompt, SynthesisRequest

__all__ = ["Delivered", "Ended", "Event", "HandedOff", "Released", "Scheduler"]


S = RequestState


class Scheduler:
    def __init__(self, config: EngineConfig, spec: ModelSpec, estimator: LatencyEstimator,
                 kv_tokens: Callable[[Prompt], int], layout: LaneLayout | None = None) -> None:
        self.config = config
        self.spec = spec
        self.est = estimator
        self.layout = layout or lane_layout(config)
        self.kv_tokens = kv_tokens
        self.frame_s = spec.frame_seconds
        # the policies, by name from their registries (lane_policies.py, admission_policies.py)
        self.lane_policy = lane_policy(config.policy)
        self.admission = admission_policy(config.admission)
        self.gate = self.admission.gate  # the TTFA predictor when the admission policy has one
        self.margin = config.urgent_margin_s
        lanes = self.layout.lanes
        first_lane = self.lane_policy.first_lane  # where a lone chunk decodes
        self.first_batch_max = self.layout.largest(first_lane, "codec") if first_lane in lanes else 0
        self.kv = KVPagePool(config.kv_pages, config.kv_page_size)
        self.slots = CodecSlotTable(config.codec_slots, round(config.codec_state_gb * 1e9))
        self.busy: dict[str, bool] = {lane: False for lane in lanes}
        self.book = RequestBook(self.admission)
        # The role is the wiring (lanes.py's plan): an LM batcher feeding a codec batcher (both), an LM
        # batcher feeding a hand-off sink (no codec lane), a remote frame source feeding a codec
        # batcher (no LM lane). A part this engine lacks is None, and the lane policy gets a NoLane.
        self.lm: LmBatcher | None = None
        self.codec: CodecBatcher | None = None
        self.remote: RemoteFrameSource | None = None
        if "background" in lanes:
            self.codec = CodecBatcher(config, self.layout, estimator, self.lane_policy, self.slots, self.book,
                                      spec.codebooks, self.frame_s, self.admission.first_audio)
        if "lm" in lanes:
            sink = self.codec if self.codec is not None else HandOffSink(self.book, spec.codebooks)
            self.lm = LmBatcher(config, self.layout, estimator, self.kv, self.book, sink,
                                self.slots if self.codec is not None else None, first_lane,
                                self.admission.deadline_aware, self._may_defer)
            self.book.hold_with(*(p for p in (self.lm, self.codec) if p is not None))
        elif self.codec is not None:
            self.remote = RemoteFrameSource(self.book, self.codec)
            self.book.hold_with(self.remote, self.codec)
        source = self.lm if self.lm is not None else self.remote
        if source is None:
            raise ValueError(f"lane plan {sorted(lanes)} has neither an LM lane nor a codec lane")
        self.source: LmBatcher | RemoteFrameSource = source
        if self.codec is not None:
            self.codec.feed_from(source)
        no_lane = NoLane()
        self._lm_lane: LmLane = self.lm if self.lm is not None else no_lane
        self._codec_lanes: CodecLanes = self.codec if self.codec is not None else no_lane
        self._no_chunks = PendingChunks()  # the view of an engine without a codec batcher: none, ever

    def _may_defer(self, head: Request, prefill_s: float, now: float) -> bool:
        return self.admission.may_defer(self, head, prefill_s, now)

    # ------------------------------------------------------------------ the view (admission.py)
    @property
    def requests(self) -> dict[int, Request]:
        return self.book.requests

    @property
    def fed(self) -> dict[int, Request]:
        return self.book.fed

    @property
    def waiting(self) -> deque[Request]:
        return self.source.waiting

    @property
    def decoding(self) -> dict[int, Request]:
        return self.source.decoding

    @property
    def decoding_rows(self) -> int:
        return self.source.decoding_rows

    @property
    def prefilling(self) -> int:
        return self.source.prefilling

    @property
    def defer_since(self) -> float | None:
        return self.lm.defer_since if self.lm is not None else None

    @property
    def handoff(self) -> bool:
        """Role lm: chunks leave the engine (no codec slots held here)."""
        return self.codec is None

    @property
    def chunks(self) -> PendingChunks:
        return self.codec.chunks if self.codec is not None else self._no_chunks

    @property
    def pending(self) -> Mapping[int, Chunk]:
        return self.chunks.by_request

    @property
    def max_background(self) -> int:
        return self.codec.max_background if self.codec is not None else 0

    @property
    def counts(self) -> dict[str, int]:
        """The late-chunk counters (codec_batcher.py); none without a codec lane."""
        if self.codec is not None:
            return self.codec.counts
        return dict(NO_LATE_CHUNKS)

    def load(self) -> EngineLoad:
        """What the engine holds now (engine/load.py): the one view of its load outside the engine."""
        source = self.source
        return EngineLoad(open_requests=len(self.book.requests), waiting=len(source.waiting),
                          decoding=len(source.decoding), prefilling=source.prefilling,
                          kv_pages_used=self.kv.used, codec_slots_used=self.slots.used,
                          late_chunks=dict(self.counts))

    # ------------------------------------------------------------------ requests in
    def new_request(self, request_id: int, prompt: Prompt, arrival: float,
                    synthesis: SynthesisRequest | None = None, user: Any = None) -> Request:
        schedule = self.config.chunk_or(self.spec.chunk)
        r = Request(request_id, prompt, arrival, schedule, self.frame_s, self.config.ttfa_target_s,
                    synthesis, user, self.spec.codec_lookahead_frames)
        r.frame_cap = min(prompt.max_frames, self.config.max_frames)
        r.state_bytes = prompt.codec_state_base_bytes + prompt.codec_state_bytes_per_frame * r.frame_cap
        r.refresh_event()
        return r

    def add(self, r: Request, now: float) -> list[Event]:
        if r.id in self.book.requests:
            raise ValueError(f"request id {r.id} is already in the engine")
        if not r.need_pages:  # Engine.submit planned it off the loop; a direct caller (tests) did not
            r.need_pages = self.kv.pages_for(self.kv_tokens(r.prompt))
        width = r.prompt.width
        max_decode = self.lm.max_decode if self.lm is not None else 0
        cap = min(self.config.max_running, max_decode, self.config.max_prefill_batch)
        end = self.book.end
        if width > cap:
            return end(r, S.REJECTED, now,
                       f"the request runs {width} sequences per step (classifier-free guidance) but the "
                       f"engine batches at most {cap} rows (max_running, max_prefill_batch and "
                       f"decode_buckets); raise them or lower the guidance scale to 1")
        if r.need_pages > self.kv.num_pages:
            return end(r, S.REJECTED, now,
                       f"the request needs {r.need_pages} KV pages of {self.kv.page_size} positions but "
                       f"the pool has only {self.kv.num_pages}; shorten the text, lower max_frames or "
                       f"raise kv_pages")
        if self.slots.never_fits(r.state_bytes):
            return end(r, S.REJECTED, now,
                       f"the request's codec state needs {r.state_bytes / 1e9:.2f} GB at its cap of "
                       f"{r.frame_cap} frames but the memory plan holds "
                       f"{self.slots.state_bytes / 1e9:.2f} GB for all requests; shorten the text, "
                       "lower max_frames or free memory")
        waiting = self.source.waiting
        if r.continuation:  # admitted with its user request's first sentence: never refused for load
            self.book.requests[r.id] = r
            sentences.queue_continuation(waiting, r)
            return []
        refusal = self.admission.screen(self, r, now)
        if refusal is not None:
            return end(r, S.REJECTED, now, refusal)
        if len(waiting) >= self.config.max_queue:
            return end(r, S.REJECTED, now,
                       f"the queue is full ({self.config.max_queue} requests waiting); retry later or "
                       f"raise max_queue")
        self.book.open(r)
        waiting.append(r)
        return []

    def continue_after(self, r: Request, playback_end: float) -> None:
        """Mark `r` (not yet added) as the next sentence of a user request already admitted whose audio
        delivered so far plays until `playback_end` (engine/sentences.py)."""
        sentences.continue_after(r, playback_end)

    def cancel(self, request_id: int, now: float) -> list[Event]:
        return self.book.cancel(request_id, now)

    def cancel_unarrived(self, r: Request, now: float) -> list[Event]:
        """End a request that was submitted but never reached `add` (virtual-time arrivals)."""
        return self.book.cancel_unarrived(r, now)

    def fail(self, request_id: int, now: float, reason: str) -> list[Event]:
        """End a request as failed for a reason outside this engine (the other role's replica died)."""
        return self.book.fail(request_id, now, reason)

    def close(self, now: float, reason: str) -> list[Event]:
        """End every open request (the engine is closing) and release what no batch in flight still
        uses; requests ended earlier whose batch has completed since are released too."""
        return self.book.close(now, reason, idle=not any(self.busy.values()))

    @property
    def idle(self) -> bool:
        return not self.book.requests

    # ------------------------------------------------------------------ role codec (remote_source.py)
    def _remote_source(self) -> RemoteFrameSource:
        if self.remote is None:
            raise RuntimeError("only a codec-only engine (role codec) takes remote requests")
        return self.remote

    def bind_slots_with(self, bind: Callable[[Request], None]) -> None:
        """Role codec: how a request's codec slot gets its state when it is acquired."""
        self._remote_source().bind = bind

    def open_remote(self, r: Request, now: float) -> list[Event]:
        """Role codec: a request whose LM runs in another engine; it waits (FIFO) for a codec slot."""
        return self._remote_source().open(r, now)

    def feed_remote(self, r: Request, codes: np.ndarray, last: bool, now: float) -> list[Event]:
        """Role codec: the next chunk's frames of `r` arrived (in order; `last`: the LM is done)."""
        return self._remote_source().feed(r, codes, last, now)

    def take_unreported(self) -> list[Event]:
        """Events of requests ended inside `decide` / `open_remote` (a codec slot that took no state)."""
        return self.remote.take_unreported() if self.remote is not None else []

    # ------------------------------------------------------------------ decisions
    def decide(self, now: float, free_lanes: Iterable[str] | None = None) -> list[Work]:
        busy = self.busy  # (keys: the layout's lanes; a lane not among them is never free)
        if free_lanes is None:
            free = {lane for lane in self.layout.lanes if not busy[lane]}
        else:  # the layout's idle lanes among those given, in one pass
            free = {lane for lane in free_lanes if not busy.get(lane, True)}
        works: list[Work] = []
        if self.remote is not None and self.remote.waiting:
            self.remote.admit(now)
        self.lane_policy.decide(self._lm_lane, self._codec_lanes, free, len(self.layout.lanes), now, works)
        for w in works:
            busy[w.lane] = True
            w.decided_at = now
        return works

    def next_timer(self, now: float) -> float | None:
        """Earliest future time at which `decide` could act without a completion or arrival."""
        codec = self.codec
        times = codec.timers(now, not self.busy["background"]) if codec is not None else []
        lm = self.lm
        if lm is not None:
            if lm.defer_since is not None:
                times.append(lm.defer_since + self.config.max_defer_s)
            if self.book.fed:  # rows whose text is open, sitting out steps until their playback catches up
                times += text_pacing.wake_times(self.book.fed, lm.key_step, lm.key_codec1)
        future = [t for t in times if t > now]
        return min(future) if future else None

    # ------------------------------------------------------------------ completions
    def complete(self, c: Completion) -> list[Event]:
        work = c.work
        self.busy[work.lane] = False
        self.admission.observe(self, c)
        if work.stage == "codec":
            return self.codec.complete(c)  # type: ignore[union-attr]  # (a codec batch: a codec lane)
        return self.lm.complete(c)  # type: ignore[union-attr]  # (an LM batch: an LM lane)
