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

Every method returns what happened as events (`Delivered`, `Ended`, `Released`) so the engine can feed
its audio streams; the scheduler never calls the model or the user. Same inputs at the same times give
the same decisions: all orderings use stable keys (deadline, request id), never dict order of floats
or object identity.

Decisions by policy (see `lanes.py` for how lanes share the device):
  LM lane (every policy): a prefill batch from the head of the queue when pages, a codec slot and a
    running row are free for each request; with `admission = "deadline"` it is deferred while the
    smallest running slack is below its estimated duration, never `max_defer_s` or more in a row.
    Otherwise one decode step for the running rows: least slack first (deadline admission) or
    admission order (prefill-first), up to the largest decode bucket. `admission = "ttfa-gate"` runs
    the LM lane as deadline admission does (a deferral never costs the head request its own TTFA) and
    refuses at `add` what would miss its TTFA target (voxcli/engine/admission.py).
  Rows: a request whose prompt has `width` w (a CFG pair: 2 sequences in every forward pass) is one
    Request but w rows: it counts w toward `max_running`, `max_prefill_batch`, the largest decode
    bucket and the bucket of every LM batch holding it, and is never split across batches (its rows
    are one `Row`, so they are admitted, batched, cancelled and freed together). Prefill tokens count
    `length * width` (`Prompt.length` is per sequence).
  full: urgent lane = first chunks and chunks within `urgent_margin_s` of their deadline, deadline
    order, up to the largest urgent bucket, whenever the lane is free. Background lane = the other
    ready chunks, in deadline order up to the largest background bucket, launched when at least B are
    ready, or when the earliest deadline minus the batch's estimated latency comes within the urgent
    margin (the last moment the batch can finish before its first chunk would turn urgent), or when the
    LM lane has no request left to generate for. With `slack_cap` a launched batch is cut to the head of
    the deadline order that ends before its first chunk turns urgent, and a chunk no background batch can
    end in time is left to the urgent lane (`_slack_fit`, `_background_start`).
  lanes: one asynchronous codec lane ("background", no partition, no urgent lane) with the same slack
    batching, except that an urgent chunk (first, or near its deadline) launches the batch at once.
  sync2: one host loop; each iteration launches an LM step and a codec batch of every ready chunk
    together and waits for both.
  sync: one host loop; an LM step, then a codec batch of every ready chunk, one after the other.
A request's next chunk becomes dispatchable only after its previous chunk has been delivered.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from heapq import merge
from itertools import compress, count, islice, repeat
from operator import attrgetter, is_
from typing import Any

import numpy as np

from voxcli.config import EngineConfig
from voxcli.engine import admission
from voxcli.engine.codec_slots import CodecSlotTable
from voxcli.engine.estimates import LatencyEstimator
from voxcli.engine.executors.base import Completion, LaneName, Work
from voxcli.engine.frame_log import SETTLE_AFTER, FrameLog
from voxcli.engine.kv_cache import KVPagePool
from voxcli.engine.lanes import LaneLayout, lane_layout
from voxcli.engine.request import Chunk, ChunkRecord, Request, RequestState
from voxcli.models.base import CodecItem, ModelSpec, Prompt, Row, StepOutput, SynthesisRequest

S = RequestState


@dataclass(slots=True)
class Delivered:
    """A chunk's PCM is ready for the user."""

    request: Request
    chunk: Chunk
    pcm: np.ndarray
    t: float


@dataclass(slots=True)
class HandedOff:
    """A chunk's codes leave the engine (role lm: its lane plan has no codec lane; engine/roles.py)."""

    request: Request
    chunk: Chunk
    codes: np.ndarray
    t: float


@dataclass(slots=True)
class Ended:
    """A request reached a terminal state (done, failed, cancelled, rejected); see request.state/reason."""

    request: Request
    t: float


@dataclass(slots=True)
class Released:
    """A request's pages and slot went back to the pools (the program may drop its per-row state)."""

    request: Request


Event = Delivered | Ended | Released | HandedOff


class Scheduler:
    def __init__(self, config: EngineConfig, spec: ModelSpec, estimator: LatencyEstimator,
                 kv_tokens: Callable[[Prompt], int], layout: LaneLayout | None = None) -> None:
        self.config = config
        self.spec = spec
        self.est = estimator
        self.layout = layout or lane_layout(config)
        self.kv_tokens = kv_tokens
        self.kv = KVPagePool(config.kv_pages, config.kv_page_size)
        self.slots = CodecSlotTable(config.codec_slots, round(config.codec_state_gb * 1e9))
        self.frame_s = spec.frame_seconds
        self.policy = config.policy
        self.deadline_admission = config.admission in ("deadline", "ttfa-gate")
        self.gate = admission.TtfaGate() if config.admission == "ttfa-gate" else None
        self.margin = config.urgent_margin_s
        # Batch caps and buckets come from the lane plan (lanes.py), the same table the executors build
        # their graphs from.
        self.max_urgent = self.layout.largest("urgent", "codec") if "urgent" in self.layout.lanes else 0
        lanes = self.layout.lanes
        self.max_background = self.layout.largest("background", "codec") if "background" in lanes else 0
        self.max_decode = self.layout.largest("lm", "decode") if "lm" in lanes else 0
        # Roles (engine/roles.py) are lane plans: without a codec lane each ready chunk is handed off (its
        # codes leave the engine at once); without an LM lane chunks arrive through `feed_remote`.
        self.handoff = "background" not in lanes
        self.remote_lm = "lm" not in lanes
        # role codec: the engine gives a request's codec slot its state (program.bind_codec_slot) the moment
        # the slot is acquired, before any chunk of it can launch; a request it fails on ends, its events
        # wait in `unreported` for the engine (`take_unreported`)
        self.bind_remote: Callable[[Request], None] | None = None
        self.unreported: list[Event] = []
        self.empty_codes = np.zeros((0, spec.codebooks), dtype=np.int64)

        self.requests: dict[int, Request] = {}  # every non-terminal request, by id
        self.waiting: deque[Request] = deque()
        self.decoding: dict[int, Request] = {}  # admission order
        self.prefilling = 0  # rows (sum of widths) in the prefill batch in flight
        self.decoding_rows = 0  # rows (sum of widths) of `decoding`
        self.pending: dict[int, Chunk] = {}  # dispatchable chunks, at most one per request
        self._firsts: dict[int, Chunk] = {}
        self._order: list[tuple[float, int]] = []
        self.busy: dict[str, bool] = {lane: False for lane in self.layout.lanes}
        self.defer_since: float | None = None
        self._sync_codec_turn = False
        self._key_step = estimator.decode_step(1)
        self._key_lane = "urgent" if self.policy == "full" else "background"  # where a lone chunk decodes
        self._key_codec1 = estimator.codec(self._key_lane, 1)
        self._key_at: tuple[int, int] | None = None  # (rows, estimator version) of the two keys above
        self._ended_in_lm: set[int] = set()  # requests that ended while an LM batch held them
        self._decode_all = False  # a decode step of every running row is in flight
        # (requests, rows, bucket) of a step of every running row, kept until `decoding` changes: most
        # steps run the same rows as the one before, and the lists are read-only downstream
        self._decode_batch: tuple[list[Request], list[Row], int] | None = None
        # The hot path (`_decode_logged`): a step of every running row goes into the frame log whole,
        # and touches only the rows filed under that step (`_schedule_due`), not every row.
        self._log = FrameLog()
        self._log_all = True  # the next logged step attaches every row (none attached, or flushed)
        self._joiners: list[Request] = []  # rows that started running since the last logged step
        self._step_no = 0  # steps of every running row completed: the clock of `_due`
        self._due: dict[int, list[Request]] = {}  # step number -> rows due then (stale entries skipped)
        self._due_ok = True  # False after a capped step (not every row advanced): rebuilt at the next
        self._join_seq = 0  # running rows in admission order (`Request.join_seq`): batch order
        # background batch threshold B; with adaptive_batching it follows the lane's measured load
        self._bg_min = config.background_min_batch
        self._bg_load = 0.0  # exponential average of the background lane's busy fraction
        self._bg_last = 0.0  # when its previous batch finished
        # the late-chunk path (config late_urgent / deadline_launch): later chunks launched on the urgent
        # lane ("promoted") and background batches launched below B by their deadline trigger alone
        self.late_urgent = config.late_urgent
        self.deadline_launch = config.deadline_launch
        # config slack_cap (policy full): background batches cut by their chunks' slack ("slack_cuts")
        self.slack_cap = config.slack_cap and config.policy == "full"  # (lanes: no urgent lane to leave)
        self.counts = {"promoted": 0, "deadline_launches": 0, "slack_cuts": 0}
        self._bg_padded: dict[tuple[int, int], tuple[int, int]] = {}  # (chunks, frames) -> (bucket, frames)

    # ------------------------------------------------------------------ requests in and out
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
        if r.id in self.requests:
            raise ValueError(f"request id {r.id} is already in the engine")
        r.need_pages = self.kv.pages_for(self.kv_tokens(r.prompt))
        width = r.prompt.width
        cap = min(self.config.max_running, self.max_decode, self.config.max_prefill_batch)
        if width > cap:
            return self._end(r, S.REJECTED, now,
                             f"the request runs {width} sequences per step (classifier-free guidance) but "
                             f"the engine batches at most {cap} rows (max_running, max_prefill_batch and "
                             f"decode_buckets); raise them or lower the guidance scale to 1")
        if r.need_pages > self.kv.num_pages:
            return self._end(r, S.REJECTED, now,
                             f"the request needs {r.need_pages} KV pages of {self.kv.page_size} positions "
                             f"but the pool has only {self.kv.num_pages}; shorten the text, lower max_frames "
                             f"or raise kv_pages")
        if self.slots.never_fits(r.state_bytes):
            return self._end(r, S.REJECTED, now,
                             f"the request's codec state needs {r.state_bytes / 1e9:.2f} GB at its cap of "
                             f"{r.frame_cap} frames but the memory plan holds "
                             f"{self.slots.state_bytes / 1e9:.2f} GB for all requests; shorten the text, "
                             "lower max_frames or free memory")
        if r.continuation:  # admitted with its user request's first sentence: never refused for load
            self._queue_continuation(r)
            return []
        if self.gate is not None:
            verdict = self.gate.predict(self, r, now)
            if not verdict.admit:
                r.retry_after = verdict.retry_after
                return self._end(r, S.REJECTED, now, verdict.reason)
            if verdict.first_chunk is not None:
                r.set_schedule(admission.urgent_schedule(r.schedule, verdict.first_chunk))
        if len(self.waiting) >= self.config.max_queue:
            return self._end(r, S.REJECTED, now,
                             f"the queue is full ({self.config.max_queue} requests waiting); retry later or "
                             f"raise max_queue")
        self.requests[r.id] = r
        self.waiting.append(r)
        return []

    def continue_after(self, r: Request, playback_end: float) -> None:
        """Mark `r` (not yet added) as the next sentence of a user request already admitted whose audio
        delivered so far plays until `playback_end`: that is its first chunk's deadline (its TTFA target,
        from its arrival), and `add` queues it ahead of new requests without the load checks."""
        r.continuation = True
        r.ttfa_target = max(0.0, playback_end - r.arrival)

    def _queue_continuation(self, r: Request) -> None:
        """Into the queue behind the continuations already waiting, ahead of every new request: what was
        accepted finishes before anything new starts (the queue's head is only ever popped in order)."""
        self.requests[r.id] = r
        i = 0
        for q in self.waiting:
            if not q.continuation:
                break
            i += 1
        self.waiting.insert(i, r)

    def cancel(self, request_id: int, now: float) -> list[Event]:
        r = self.requests.get(request_id)
        if r is None:
            return []  # already finished (or unknown): cancelling is idempotent
        return self._end(r, S.CANCELLED, now, "cancelled by the user")

    def cancel_unarrived(self, r: Request, now: float) -> list[Event]:
        """End a request that was submitted but never reached `add` (virtual-time arrivals)."""
        return self._end(r, S.CANCELLED, now, "cancelled by the user")

    def close(self, now: float, reason: str) -> list[Event]:
        """End every open request (the engine is closing) and release what no batch in flight still
        uses; requests ended earlier whose batch has completed since are released too."""
        events: list[Event] = []
        idle = not any(self.busy.values())  # every batch came back: no in-flight flag is still true
        for r in list(self.requests.values()):
            if idle:
                r.lm_inflight = r.chunk_inflight = False
            events += self._end(r, S.CANCELLED, now, reason)
        return events

    @property
    def idle(self) -> bool:
        return not self.requests

    # ------------------------------------------------------------------ decisions
    def decide(self, now: float, free_lanes: Iterable[str] | None = None) -> list[Work]:
        busy = self.busy  # (keys: the layout's lanes; a lane not among them is never free)
        if free_lanes is None:
            free = {lane for lane in self.layout.lanes if not busy[lane]}
        else:  # the layout's idle lanes among those given, in one pass
            free = {lane for lane in free_lanes if not busy.get(lane, True)}
        works: list[Work] = []
        policy = self.policy
        if self.remote_lm and self.waiting:
            self._admit_remote(now)
        if policy == "full":
            if "urgent" in free:
                self._add(works, self._urgent_batch(now))
            if "lm" in free:
                self._add(works, self._lm_work(now))
            if "background" in free:
                self._add(works, self._background_batch(now, urgent_lane=True))
        elif policy == "lanes":
            if "lm" in free:
                self._add(works, self._lm_work(now))
            if "background" in free:
                self._add(works, self._background_batch(now, urgent_lane=False))
        elif policy == "sync2":
            if len(free) == len(self.layout.lanes):  # wait for both halves of the iteration
                self._add(works, self._lm_work(now))
                self._add(works, self._codec_all(now))
        else:  # sync: LM step, then codec batch, never both
            if len(free) == len(self.layout.lanes):
                if self._sync_codec_turn:
                    self._sync_codec_turn = False
                    self._add(works, self._codec_all(now))
                if not works:
                    self._add(works, self._lm_work(now))
                    if works:
                        self._sync_codec_turn = True
                    else:
                        self._add(works, self._codec_all(now))
        for w in works:
            w.decided_at = now
        return works

    def _add(self, works: list[Work], work: Work | None) -> None:
        if work is not None:
            self.busy[work.lane] = True
            works.append(work)

    # --- LM lane
    def _prefill_candidates(self) -> list[Request]:
        cfg = self.config
        room = min(cfg.max_running - self.decoding_rows - self.prefilling, cfg.max_prefill_batch)
        pages, slots, tokens, rows = self.kv.free, self.slots.free, 0, 0
        state = self.slots.state_free  # None: no growing codec state to budget
        out: list[Request] = []
        for r in self.waiting:  # FIFO, no overtaking: a big request is not starved by small ones
            w = r.prompt.width
            if rows + w > room or r.need_pages > pages or (slots < 1 and not self.handoff):
                break
            if state is not None:
                if r.state_bytes > state:  # its codec state waits for others' to be released
                    break
                state -= r.state_bytes
            if out and tokens + r.prompt.length * w > cfg.max_prefill_tokens:
                break
            out.append(r)
            pages -= r.need_pages
            slots -= 1
            tokens += r.prompt.length * w
            rows += w
        return out

    def _lm_work(self, now: float) -> Work | None:
        cands = self._prefill_candidates() if self.waiting else []
        if cands:
            admit = True
            if self.deadline_admission and self.decoding:
                est = self.est.prefill(sum(r.prompt.length * r.prompt.width for r in cands), _rows(cands))
                ks, kc = self._key_step, self._key_codec1
                min_slack = min([r.slack_key(ks, kc) for r in self.decoding.values()]) - now
                if min_slack < est and (self.gate is None or self.gate.may_defer(self, cands[0], est, now)):
                    if self.defer_since is None:
                        self.defer_since = now
                    if now - self.defer_since < self.config.max_defer_s:
                        admit = False
            if admit:
                self.defer_since = None
                return self._launch_prefill(cands, now)
        else:
            self.defer_since = None  # waiting for resources is not a deferral
        if self.decoding:
            return self._launch_decode(now)
        return None

    def _launch_prefill(self, cands: list[Request], now: float) -> Work:
        rows: list[Row] = []
        for r in cands:
            self.waiting.popleft()  # candidates are the queue's head, in order
            r.pages = self.kv.allocate(r.need_pages, r.id)
            # role lm holds no codec slot: its chunks' codec state lives in the codec engine
            slot = -1 if self.handoff else self.slots.acquire(r.id, r.state_bytes)
            assert slot is not None  # checked by _prefill_candidates
            r.slot = slot
            r.row = Row(request_id=r.id, prompt=r.prompt, pages=r.pages, slot=slot)
            r.state = S.PREFILL
            r.lm_inflight = True
            r.timeline.admitted = now
            r.timeline.status = S.PREFILL.value
            rows.append(r.row)
        n = _rows(cands)
        self.prefilling += n
        return Work(lane="lm", stage="prefill", rows=rows, bucket=n, tag=cands,
                    tokens=sum(r.prompt.length * r.prompt.width for r in cands))

    def _launch_decode(self, now: float) -> Work:
        if self.decoding_rows <= self.max_decode:
            # every running row: `_decode_all` stands for their lm_inflight flags (no per-row writes;
            # `_end` sets the flag of a row that ends while the step runs)
            batch = self._decode_batch
            if batch is None:
                reqs = list(self.decoding.values())
                batch = self._decode_batch = (reqs, list(map(_row_of, reqs)),
                                              self.layout.bucket_for("lm", "decode", self.decoding_rows))
            self._decode_all = True
            return Work(lane="lm", stage="decode", rows=batch[1], bucket=batch[2], tag=batch[0])
        # Fill the largest bucket in priority order; a pair that no longer fits waits for the next
        # step whole (the first in order always fits: add() rejects widths above the bucket).
        order: Iterable[Request] = (sorted(self.decoding.values(), key=lambda r: (self._key(r), r.id))
                                    if self.deadline_admission else self.decoding.values())
        reqs, rows = [], 0
        for r in order:
            if rows + r.prompt.width <= self.max_decode:
                reqs.append(r)
                rows += r.prompt.width
                if rows == self.max_decode:
                    break
        for r in reqs:
            r.lm_inflight = True
        return Work(lane="lm", stage="decode", rows=list(map(_row_of, reqs)),
                    bucket=self.layout.bucket_for("lm", "decode", _rows(reqs)), tag=reqs)

    # --- codec lanes
    # Pending chunks live in two ordered structures so decisions never sort everything: first chunks
    # (always urgent, few) in `_firsts`, continuation chunks in `_order`, a list of (deadline, id) kept
    # sorted; their deadlines are fixed once the chunk is ready, so urgency is a prefix of `_order`.
    def _pend(self, ch: Chunk) -> None:
        self.pending[ch.request.id] = ch
        if ch.index == 0:
            self._firsts[ch.request.id] = ch
        else:
            insort(self._order, (ch.deadline, ch.request.id))

    def _unpend(self, ch: Chunk) -> None:
        rid = ch.request.id
        del self.pending[rid]
        if ch.index == 0:
            del self._firsts[rid]
        else:
            i = bisect_left(self._order, (ch.deadline, rid))
            del self._order[i]

    def _urgent_prefix(self, now: float) -> int:
        """How many chunks at the front of `_order` are within the urgent margin of their deadline (none
        with late_urgent off: later chunks then stay in the background lane however late)."""
        order, margin = self._order, self.margin
        if not self.late_urgent or not order or order[0][0] - now >= margin:
            return 0
        # deadline - now is monotone in the deadline, so the urgent ones are a prefix: bisect it (a codec
        # that lags leaves hundreds of chunks past their deadline, scanned on every decision otherwise)
        return bisect_left(order, True, key=lambda e: e[0] - now >= margin)

    def _chunks(self, keys: list[tuple[float, int]]) -> list[Chunk]:
        pending = self.pending
        return [pending[rid] for _, rid in keys]

    def _all_in_order(self, limit: int) -> list[Chunk]:
        rest = self._chunks(self._order[:limit])
        if not self._firsts:
            return rest
        firsts = sorted(self._firsts.values(), key=_chunk_order)
        return list(islice(merge(firsts, rest, key=_chunk_order), limit))

    def _urgent_batch(self, now: float) -> Work | None:
        if not self.pending:
            return None
        n_near = self._urgent_prefix(now)
        if not n_near and not self._firsts:
            return None
        near = self._chunks(self._order[: min(n_near, self.max_urgent)])
        if self._firsts:
            firsts = sorted(self._firsts.values(), key=_chunk_order)
            batch = list(islice(merge(firsts, near, key=_chunk_order), self.max_urgent))
            if near:
                self.counts["promoted"] += sum(ch.index > 0 for ch in batch)
        else:  # later chunks only (the steady state under load): already in order, all promoted
            batch = near
            self.counts["promoted"] += len(batch)
        return self._launch_codec("urgent", batch, now)

    def _background_batch(self, now: float, urgent_lane: bool) -> Work | None:
        if not self.pending:
            return None
        if urgent_lane:
            i0 = self._background_start(now)
            batch = self._chunks(self._order[i0: i0 + self.max_background])
            if not batch:
                return None
            force = False
        else:
            batch = self._all_in_order(self.max_background)
            force = bool(self._firsts) or self._urgent_prefix(now) > 0
        if not (force or len(batch) >= self._bg_min or self._lm_has_nothing_left()):
            if not (self.deadline_launch and now >= self._background_trigger(batch)):
                return None
            self.counts["deadline_launches"] += 1  # below B, launched only so it is not late
        if urgent_lane and self.slack_cap:
            n = self._slack_fit(batch, now)
            if n < len(batch):
                self.counts["slack_cuts"] += 1
                batch = batch[:n]
        return self._launch_codec("background", batch, now)

    # The slack cap (config slack_cap, policy full). All chunks of a background batch end together, so the
    # batch is only as good as its earliest deadline: a 32-chunk batch on a small partition (143 ms on 16
    # H100 SMs) that starts 120 ms before its first chunk's deadline ends late, while that chunk, left
    # alone, would have turned urgent 20 ms later and decoded on the whole device. So a background batch
    # must deliver each of its chunks no later than the urgent lane would: by the moment the chunk turns
    # urgent (deadline - urgent margin, the point the deadline trigger aims at; the margin is what absorbs
    # the estimates' error) plus one urgent decode of it (`_alone`). The largest head of the deadline
    # order that does is launched. A chunk that cannot make it even alone is left to the urgent lane
    # (`_background_start`). With late_urgent off no lane would take a chunk near its deadline, so the
    # margin means nothing and a batch need only end by its chunks' deadlines; a chunk that cannot stays at
    # the head and launches with the batch, and only the chunks that can still be in time bind the cut
    # (measured, scripts/late_chunks.py at 112/16: cutting at deadline - margin there starved the lane of
    # batch size and stalled more than no cap at all). Durations are estimated at the bucket the batch
    # runs in (padded rows cost like real ones, as the executors run them).
    def _background_start(self, now: float, i: int | None = None) -> int:
        """Index in `_order` of the background lane's first candidate: past the urgent prefix (`i`, when
        the caller has it) and, with the slack cap, past the chunks the urgent lane will deliver sooner
        than even a batch of one."""
        if i is None:
            i = self._urgent_prefix(now)
        if not (self.slack_cap and self.late_urgent):
            return i
        order, pending, alone = self._order, self.pending, self._alone
        memo: dict[int, tuple[float, float]] = {}
        while i < len(order):
            deadline, rid = order[i]
            f = pending[rid].end - pending[rid].start
            one = memo.get(f) or memo.setdefault(f, alone(f))
            if now + one[0] <= deadline + one[1]:
                break
            i += 1
        return i

    def _alone(self, frames: int) -> tuple[float, float]:
        """(seconds of a background batch of one chunk of `frames`, its latest end less its deadline): a
        background batch holding the chunk must end by its deadline - urgent margin + one urgent decode
        of it, or by its deadline with late_urgent off (see above)."""
        if not self.late_urgent:
            return self._background_seconds(1, frames), 0.0
        return self._background_seconds(1, frames), self.est.codec("urgent", 1, frames) - self.margin

    def _slack_fit(self, batch: list[Chunk], now: float) -> int:
        """How many chunks from the head of `batch` (deadline order) one background batch can take and
        still end by the latest end of every one of them that could be in time alone (at least one: a
        chunk that cannot binds nothing, and the head always goes, so nothing is starved)."""
        alone, memo = self._alone, {}
        limits: list[float] = []  # the latest end owed to the first n chunks, n = 1, 2, ...
        totals: list[int] = []  # their frames
        limit, frames = float("inf"), 0
        for ch in batch:
            f = ch.end - ch.start
            frames += f
            one = memo.get(f) or memo.setdefault(f, alone(f))
            end_by = ch.deadline + one[1]
            if end_by < limit and now + one[0] <= end_by:
                limit = end_by
            limits.append(limit)
            totals.append(frames)
        seconds = self._background_seconds
        if now + seconds(len(batch), frames) <= limit + 1e-9:  # the usual case: the whole batch is in time
            return len(batch)
        fit = 0
        for n in range(1, len(batch)):
            if now + seconds(n, totals[n - 1]) > limits[n - 1] + 1e-9:
                break
            fit = n
        return max(fit, 1)

    def _background_seconds(self, n: int, frames: int) -> float:
        """Estimated duration of a background batch of `n` chunks (`frames` in all) at its bucket."""
        key = (n, frames)
        padded = self._bg_padded.get(key)  # (asked on every decision the background lane is free)
        if padded is None:
            bucket = self.layout.bucket_for("background", "codec", n)
            padded = self._bg_padded[key] = (bucket, round(frames * bucket / n))
        # not cached here: a real-clock estimator rescales its answers as it observes batches
        return self.est.codec("background", *padded)

    def _adapt_background(self, c: Completion) -> None:
        """Adaptive batching: B follows the background lane's load. Busy most of the time, it waits
        for bigger batches (one fixed launch cost per batch, and the lane drains faster); mostly idle,
        it keeps the configured B (a chunk never waits for company it does not need). The deadline
        trigger still launches any batch that would otherwise be late."""
        gap = max(c.finished - self._bg_last, c.finished - c.started, 1e-9)
        self._bg_last = c.finished
        busy = (c.finished - c.started) / gap
        self._bg_load = 0.8 * self._bg_load + 0.2 * min(1.0, busy)
        b0 = self.config.background_min_batch
        self._bg_min = max(b0, round(b0 + (self.max_background - b0) * max(0.0, self._bg_load - 0.5) * 2))

    def _background_trigger(self, batch: list[Chunk]) -> float:
        """Latest launch time at which the batch still ends before its earliest chunk turns urgent."""
        frames = sum(ch.frames for ch in batch)
        seconds = (self._background_seconds(len(batch), frames) if self.slack_cap
                   else self.est.codec("background", len(batch), frames))
        return batch[0].deadline - self.margin - seconds

    def _lm_has_nothing_left(self) -> bool:
        return not self.decoding and not self.prefilling

    def _codec_all(self, now: float) -> Work | None:
        if not self.pending:
            return None
        return self._launch_codec("background", self._all_in_order(self.max_background), now)

    def _launch_codec(self, lane: LaneName, chunks: list[Chunk], now: float) -> Work:
        flat: list[Any] = []  # every frame of the batch: one array build, then a view per chunk
        pending, firsts, settle = self.pending, self._firsts, self._log.settle
        keys: list[tuple[float, int]] = []  # the continuation chunks' `_order` entries, in order
        for ch in chunks:
            r = ch.request
            frames, end = r.frames, ch.end
            if len(frames) < end:  # its frames are still in the frame log (frame_log.py)
                settle(r)
            rid = r.id
            del pending[rid]  # _unpend, the `_order` entries below at once
            if ch.index == 0:
                del firsts[rid]
            else:
                keys.append((ch.deadline, rid))
            r.chunk_inflight = True
            ch.t_dispatched = now
            ch.lane = lane
            flat += frames[ch.start:end]
        if keys:
            order = self._order
            i = bisect_left(order, keys[0])
            if order[i:i + len(keys)] == keys:  # a run of `_order` (the usual batch): one deletion
                del order[i:i + len(keys)]
            else:
                for key in keys:
                    del order[bisect_left(order, key)]
        empty = self.empty_codes
        codes_all = _stack_frames(flat) if flat else empty
        items: list[CodecItem] = []
        append, frames = items.append, 0
        for ch in chunks:
            a, b = frames, frames + ch.end - ch.start
            append(CodecItem(ch.request.slot, codes_all[a:b] if b > a else empty, ch.index == 0, ch.last))
            frames = b
        bucket = self.layout.bucket_for(lane, "codec", len(items))
        return Work(lane=lane, stage="codec", rows=items, bucket=bucket, tag=chunks, frames=frames)

    # ------------------------------------------------------------------ timers
    def next_timer(self, now: float) -> float | None:
        """Earliest future time at which `decide` could act without a completion or arrival."""
        times: list[float] = []
        if self.defer_since is not None:
            times.append(self.defer_since + self.config.max_defer_s)
        if self._order and self.policy in ("full", "lanes"):
            i0 = self._urgent_prefix(now)
            if i0 < len(self._order):
                if self.late_urgent:
                    times.append(self._order[i0][0] - self.margin)  # promotion to urgent
                if self.deadline_launch and not self.busy["background"]:
                    i = self._background_start(now, i0) if self.slack_cap else i0
                    batch = self._chunks(self._order[i: i + self.max_background])
                    if batch:
                        times.append(self._background_trigger(batch))
        future = [t for t in times if t > now]
        return min(future) if future else None

    # ------------------------------------------------------------------ completions
    def complete(self, c: Completion) -> list[Event]:
        work = c.work
        self.busy[work.lane] = False
        if self.gate is not None and c.error is None and not c.reruns:
            self.gate.observe(self, work.stage, work.lane, work.bucket, work.tokens, work.frames,
                              c.finished - c.started)
        if work.stage == "codec":
            if work.lane == "background" and self.config.adaptive_batching:
                self._adapt_background(c)
            return self._complete_codec(c)
        return self._complete_lm(c)

    def _complete_lm(self, c: Completion) -> list[Event]:
        work = c.work
        reqs: list[Request] = work.tag
        events: list[Event] = []
        now = c.finished
        prefill = work.stage == "prefill"
        decode_all = self._decode_all
        if prefill:
            self.prefilling -= _rows(reqs)
        else:
            self._decode_all = False
        if c.error is not None or c.result is None or len(c.result) != len(reqs):
            reason = _stage_reason(work.stage, c)
            for r in reqs:
                r.lm_inflight = False
                if r.state.terminal:
                    events += self._maybe_release(r)
                else:
                    events += self._end(r, S.FAILED, now, reason)
            return events
        # slack keys are computed on demand (`_key`) from the step estimate of the latest LM step
        # (both follow the estimator's measured scale on real-clock executors; asked again only when
        # the rows or the estimator changed)
        est = self.est
        at = (self.decoding_rows + (_rows(reqs) if prefill else 0), est.version)
        if at != self._key_at:
            self._key_at = at
            self._key_step = est.decode_step(at[0])
            self._key_codec1 = est.codec(self._key_lane, 1)
        due: list[Request] = []
        if not prefill:
            if decode_all:  # every running row got one more frame: the clock of `_due` moves on
                self._step_no += 1
                due = self._due.pop(self._step_no, due)
            else:
                self._due_ok = False
        if not prefill and decode_all and self._due_ok and not self._ended_in_lm:
            logged = self._decode_logged(reqs, c.result, now, due)
            if logged is not None:
                return logged
        if not prefill:
            self._flush_log()  # the paths below store frames in r.frames directly
        if not prefill and not self._ended_in_lm:
            if not decode_all:  # a capped step flagged its rows one by one (_launch_decode); no row ended
                for r in reqs:
                    r.lm_inflight = False
            events = self._decode_rows(reqs, c.result, now)
        else:
            self._ended_in_lm.clear()
            for r, out in zip(reqs, c.result, strict=True):
                events += self._lm_row(r, out, now, work.stage)
        if decode_all and not self._due_ok:
            self._rebuild_due()
        return events

    def _decode_logged(self, reqs: list[Request], results: list, now: float,
                       due: list[Request]) -> list[Event] | None:
        """The hot path, a step of every running row, with no Python code per row: the result list goes
        into the frame log (frame_log.py) as one list, and only the rows with more to do than store a frame
        are taken, settled first: the rows due at this step (`_schedule_due`: the first frame, a chunk
        boundary, the frame cap), rows done and rows without a frame (`_lm_row`), in batch order as a
        row-by-row pass would take them. None (use `_decode_rows`) when a row's result is an error."""
        try:
            frames = list(map(_frame_of, results))
            done = any(map(_done_of, results))  # one C-level pass; the indices only when some row is
        except AttributeError:  # an exception object in place of a row's StepOutput
            return None
        frameless = any(map(is_, frames, repeat(None)))
        log, decoding = self._log, self.decoding
        attach: list[Request] = _NO_ROWS
        if self._log_all:  # nothing attached yet, or flushed: every row's frames are logged from here
            attach = reqs
            self._log_all = False
        elif self._joiners:
            attach = [r for r in self._joiners if decoding.get(r.id) is r]
        if self._joiners:
            self._joiners = []
        log.step(reqs, frames, attach)  # the frames only: the StepOutputs die now, never seen by the GC
        step = self._step_no
        if not (frameless or done):  # the usual step: only the rows due (none, most steps)
            if not due:
                return []
            if len(due) > 1:
                due.sort(key=_join_seq_of)
            return self._due_frames(due, step, now)
        special: dict[int, tuple[Request, Any]] = {}
        if frameless:
            for i in compress(count(), map(is_, frames, repeat(None))):
                special[reqs[i].id] = (reqs[i], results[i])
        if done:
            for i in compress(count(), map(_done_of, results)):
                special[reqs[i].id] = (reqs[i], results[i])
        for r in due:
            if r.due_step == step and r.id not in special and decoding.get(r.id) is r:
                special[r.id] = (r, None)
        events: list[Event] = []
        steps = log.steps
        for r, out in sorted(special.values(), key=_join_order):
            if out is None:  # a plain frame (see _due_frames)
                if r.due_step != step or decoding.get(r.id) is not r:
                    continue  # filed for a later step since, or no longer running: a stale entry
                if steps - r.log_from >= SETTLE_AFTER:
                    log.settle(r)
                events += self._frame_stored(r, len(r.frames) + steps - r.log_from, now)
            else:  # done or no frame: settle, take this step's entry back and let `_lm_row` decide
                log.settle(r)
                r.frames.pop()
                events += self._lm_row(r, out, now, "decode")
        return events

    def _due_frames(self, due: list[Request], step: int, now: float) -> list[Event]:
        """The rows due at a step where every row got a plain frame (in batch order; a row filed twice for
        this step is taken once: the first visit files it for a later step). The frame stays in the log,
        settled when its chunk launches or when SETTLE_AFTER frames piled up (a bounded launch cost). The
        usual due row's frame completes the chunk under generation: `_frame_stored` + `_pend_next` are
        inlined for it (up to a few dozen such rows at once when rows run in step); any other goes to
        `_frame_stored`."""
        events: list[Event] = []
        log, decoding, pending, order = self._log, self.decoding, self.pending, self._order
        steps, handoff, due_at = log.steps, self.handoff, self._due
        for r in due:
            rid = r.id
            if r.due_step != step or decoding.get(rid) is not r:
                continue  # filed for a later step since, or no longer running: a stale entry
            logged = steps - r.log_from
            if logged >= SETTLE_AFTER:
                log.settle(r)
                logged = 0
            n = len(r.frames) + logged  # n_frames of a row attached to the log (every row of this step is)
            cap, next_end = r.frame_cap, r.next_end
            if n < next_end or n >= cap or n == 1 or handoff or r.chunk_inflight or rid in pending:
                events += self._frame_stored(r, n, now)
                continue
            # _frame_stored: next_event is the cap (the chunk is complete); _pend_next; _schedule_due
            r.next_event = cap
            ch = r.next_ready
            start = r.next_start
            if ch is not None and ch.start == start and ch.end == next_end:  # made at its delivery
                r.next_ready = None
                ch.t_ready = now
            else:
                ch = Chunk(r, r.next_chunk, start, next_end, False, now, r.deadline_of(start))
            pending[rid] = ch
            if ch.index == 0:
                self._firsts[rid] = ch
            else:
                insort(order, (ch.deadline, rid))
            at = step + (cap - n if cap - n > 1 else 1)
            r.due_step = at
            got = due_at.get(at)
            if got is None:
                due_at[at] = [r]
            else:
                got.append(r)
        return events

    def _flush_log(self) -> None:
        if self._log.current is not None:
            self._log.flush()
            self._log_all = True

    def _pend_next(self, r: Request, now: float) -> None:
        """`_advance_chunks` + `_pend` of a running request whose next chunk is complete: never its last
        chunk (the LM has not finished), and it ends at next_end (= next_start + its size, request.py)."""
        rid, index, start = r.id, r.next_chunk, r.next_start
        deadline = r.deadline_of(start)
        ch = Chunk(r, index, start, r.next_end, False, now, deadline)
        self.pending[rid] = ch
        if index == 0:
            self._firsts[rid] = ch
        else:
            insort(self._order, (deadline, rid))

    def _schedule_due(self, r: Request) -> None:
        """File a running row under the decode step at which its next frame needs more than being
        stored: the first frame, or `next_event` (a chunk boundary, the frame cap). Called whenever
        its frame count or next_event changed other than by a step of every running row; entries of
        rows that stopped running or were filed again are stale and skipped."""
        if self.decoding.get(r.id) is not r:
            return
        n = r.n_frames
        step = self._step_no + (1 if n == 0 else max(1, r.next_event - n))
        if step != r.due_step:
            r.due_step = step
            self._due.setdefault(step, []).append(r)

    def _rebuild_due(self) -> None:
        """After capped steps (some rows did not advance) file every running row afresh."""
        self._due.clear()
        for r in self.decoding.values():
            r.due_step = -1
            self._schedule_due(r)
        self._due_ok = True

    def _decode_rows(self, reqs: list[Request], results: list, now: float) -> list[Event]:
        """A decode step row by row, where `_decode_logged` cannot take it (a capped step, a row's
        error, after capped steps; only valid when no row ended in flight and the log is flushed). A row
        whose new frame completes nothing (no chunk ready, not finished) only stores its frame; a plain
        frame reaching `next_event` is `_frame_stored`; anything else (a row's error, no frame, done)
        goes to `_lm_row`. Rows are taken in batch order, as `_lm_row` alone would take them."""
        events: list[Event] = []
        step_cls = StepOutput
        for r, out in zip(reqs, results, strict=True):
            if out.__class__ is step_cls and not out.done:
                frame = out.frame
                if frame is not None:
                    frames = r.frames
                    frames.append(frame)
                    n = len(frames)
                    if 1 < n < r.next_event:
                        continue
                    events += self._frame_stored(r, n, now)
                    continue
            events += self._lm_row(r, out, now, "decode")
        return events

    def _frame_stored(self, r: Request, n: int, now: float) -> list[Event]:
        """`_lm_row` of a running row's plain frame (not done) already stored (in r.frames or the log;
        n = r.n_frames), `add_frame`'s, `_advance_chunks`' and `_schedule_due`'s steps inlined: its first
        frame, the frame cap, or the frame completing the next chunk for the codec."""
        if n == 1:
            r.timeline.first_frame = now
        cap, next_end = r.frame_cap, r.next_end
        ev = next_end if next_end > n else cap  # refresh_event
        r.next_event = ev = ev if ev < cap else cap
        if n >= cap:
            self._lm_finished(r)
            if not r.chunk_inflight and r.id not in self.pending:
                return self._advance_chunks(r, now)
            return []
        if n >= next_end and not r.chunk_inflight and r.id not in self.pending:
            if self.handoff:  # role lm: the chunk leaves the engine now (_advance_chunks hands it off)
                events = self._advance_chunks(r, now)
                self._schedule_due(r)
                return events
            self._pend_next(r, now)
        step = self._step_no + (ev - n if ev - n > 1 else 1)  # _schedule_due (n >= 1: it has a frame)
        if step != r.due_step:
            r.due_step = step
            self._due.setdefault(step, []).append(r)
        return []

    def _lm_row(self, r: Request, out: Any, now: float, stage: str) -> list[Event]:
        """One row's result of an LM batch (prefill or decode); the row's frames are all in r.frames."""
        events = self._lm_row_result(r, out, now, stage)
        self._schedule_due(r)
        return events

    def _lm_row_result(self, r: Request, out: Any, now: float, stage: str) -> list[Event]:
        r.lm_inflight = False
        if r.id not in self.requests:  # cancelled or failed while the batch ran
            return self._maybe_release(r)
        if isinstance(out, BaseException):  # a per-row error: this request alone fails
            return self._end(r, S.FAILED, now, f"the {stage} stage failed: {_describe(out)}")
        if stage == "prefill":
            r.state = S.DECODE
            r.timeline.status = S.DECODE.value
            self.decoding[r.id] = r
            self._decode_batch = None
            r.join_seq = self._join_seq
            self._join_seq += 1
            self._joiners.append(r)
            self.decoding_rows += r.prompt.width
        if out.frame is not None:
            if r.n_frames == 0:
                r.timeline.first_frame = now
            r.add_frame(out.frame)
        if out.done or r.n_frames >= r.frame_cap:
            self._lm_finished(r)
        if (r.n_frames >= r.next_end or r.state is S.DRAINING) and not r.chunk_inflight \
                and r.id not in self.pending:
            return self._advance_chunks(r, now)
        return []

    def _key(self, r: Request) -> float:
        """LM slack key (slack = key - now): the deadline of the chunk under generation, less the
        decode steps its remaining frames need and a one-chunk codec call."""
        return r.slack_key(self._key_step, self._key_codec1)

    def _lm_finished(self, r: Request) -> None:
        r.state = S.DRAINING
        r.timeline.status = S.DRAINING.value
        r.timeline.frames = r.n_frames
        del self.decoding[r.id]
        self._decode_batch = None
        self._log.detach(r)
        self.decoding_rows -= r.prompt.width
        # the LM will never touch these pages again: hand them back now, before the codec drains
        if r.pages:
            self.kv.release(r.pages, r.id)
            r.pages = []

    def _advance_chunks(self, r: Request, now: float) -> list[Event]:
        """Make the request's next chunk dispatchable if it is ready; finish a request with no chunks."""
        bounds = r.ready_chunk_bounds()
        if bounds is None:
            if r.state is S.DRAINING and r.next_chunk == 0:  # the LM produced no frame at all
                return self._end(r, S.DONE, now, None)
            return []
        start, end, last = bounds
        chunk = Chunk(request=r, index=r.next_chunk, start=start, end=end, last=last, t_ready=now,
                      deadline=r.deadline_of(start))
        if self.handoff:
            if len(r.frames) < end:  # its frames are still in the frame log (frame_log.py)
                self._log.settle(r)
            codes = np.array(r.frames[start:end]) if end > start else self.empty_codes
            return [HandedOff(r, chunk, codes, now), *self._chunk_done(r, chunk, now)]
        self._pend(chunk)
        return []

    def _complete_codec(self, c: Completion) -> list[Event]:
        chunks: list[Chunk] = c.work.tag
        events: list[Event] = []
        now = c.finished
        failed = c.error is not None or c.result is None or len(c.result) != len(chunks)
        reason = _stage_reason("codec", c) if failed else None
        decode, draining, frame_s, append = S.DECODE, S.DRAINING, self.frame_s, events.append
        remote_lm, ndarray, steps = self.remote_lm, np.ndarray, self._log.steps
        results = c.result if not failed else [None] * len(chunks)
        for ch, pcm in zip(chunks, results, strict=True):
            r = ch.request
            r.chunk_inflight = False
            state = r.state
            if state is not decode and state is not draining and state.terminal:  # (terminal hashes the enum)
                events += self._maybe_release(r)
                continue
            if failed:
                events += self._end(r, S.FAILED, now, reason)
                continue
            if pcm.__class__ is not ndarray and isinstance(pcm, BaseException):
                events += self._end(r, S.FAILED, now, f"the codec stage failed: {_describe(pcm)}")
                continue
            index, frames = ch.index, ch.end - ch.start
            audio_s = frames * frame_s if r.hold_s == 0.0 else r.released_audio_s(ch)
            r.timeline.chunks.append(ChunkRecord(index, ch.start, frames, ch.t_ready, ch.t_dispatched, now,
                                                 audio_s, ch.lane, ch.deadline if index else None))
            if index == 0:
                r.t_first_audio = now
                r.timeline.first_audio = now
                if self.gate is not None:
                    self.gate.first_audio(r, now)
            append(Delivered(r, ch, pcm, now))
            r.next_chunk += 1
            r.next_start = ch.end
            r.next_end = next_end = ch.end + r.schedule.size(r.next_chunk)
            if ch.last:
                events += self._end(r, S.DONE, now, None)
                continue
            if r.state is not decode or remote_lm:  # (role codec: no decode step files a row)
                r.refresh_event()
                events += self._advance_chunks(r, now)
                continue
            # a running request: refresh_event, _schedule_due and _advance_chunks inlined (n_frames too)
            n, cap = len(r.frames), r.frame_cap
            if r.log_epoch is not None:
                n += steps - r.log_from
            ev = next_end if next_end > n else cap
            r.next_event = ev = ev if ev < cap else cap
            step = self._step_no + (1 if n == 0 else (ev - n if ev - n > 1 else 1))
            if step != r.due_step:
                r.due_step = step
                self._due.setdefault(step, []).append(r)
            if n >= next_end:
                self._pend_next(r, now)
            else:  # made now, while its bounds are at hand; pended when its last frame comes (_due_frames)
                start = ch.end
                r.next_ready = Chunk(r, r.next_chunk, start, next_end, False, now, r.deadline_of(start))
        return events

    def _chunk_done(self, r: Request, ch: Chunk, now: float) -> list[Event]:
        """Chunk `ch` left the engine (delivered, or handed off): the next one may go."""
        r.next_chunk += 1
        r.next_start = ch.end
        r.next_end = ch.end + r.schedule.size(r.next_chunk)
        if ch.last:
            return self._end(r, S.DONE, now, None)
        r.refresh_event()
        return self._advance_chunks(r, now)

    # ------------------------------------------------------------------ chunks from an LM elsewhere
    def open_remote(self, r: Request, now: float) -> list[Event]:
        """Role codec: a request whose LM runs in another engine; it waits (FIFO) for a codec slot."""
        if r.id in self.requests:
            raise ValueError(f"request id {r.id} is already in the engine")
        if r.continuation:  # a later sentence: ahead of new requests for a slot, as in `add`
            self._queue_continuation(r)
        else:
            self.requests[r.id] = r
            self.waiting.append(r)
        self._admit_remote(now)
        return []

    def _admit_remote(self, now: float) -> None:
        while self.waiting and self.slots.free:
            r = self.waiting.popleft()
            r.slot = self.slots.acquire(r.id)  # type: ignore[assignment]
            if self.bind_remote is not None:
                try:
                    self.bind_remote(r)
                except Exception as e:  # noqa: BLE001 - this request alone fails, never with wrong audio
                    self.unreported += self._end(r, S.FAILED, now, "internal error: its codec slot could not "
                                                 f"take the request's state: {_describe(e)}")
                    continue
            r.state = S.DECODE  # "the LM is generating": its frames arrive in chunks
            r.timeline.admitted = now
            r.timeline.status = S.DECODE.value
            self.decoding[r.id] = r
            self.decoding_rows += r.prompt.width
            # a chunk 0 always holds a frame, so this only pends chunks (it never ends the request)
            self._remote_ready(r, now)

    def take_unreported(self) -> list[Event]:
        """Events of requests ended inside `decide` / `open_remote` (a codec slot that took no state)."""
        events, self.unreported = self.unreported, []
        return events

    def feed_remote(self, r: Request, codes: np.ndarray, last: bool, now: float) -> list[Event]:
        """Role codec: the next chunk's frames of `r` arrived (in order; `last`: the LM is done)."""
        if r.state.terminal:
            return []
        r.frames.extend(codes)  # (n_frames counts them: a remote request is never in the frame log)
        if last:
            r.frame_cap = r.n_frames  # the LM stopped here
        if r.state is S.QUEUED:
            return []  # buffered until a slot frees
        return self._remote_ready(r, now)

    def _remote_ready(self, r: Request, now: float) -> list[Event]:
        if r.state is S.DECODE and r.n_frames >= r.frame_cap:
            self._lm_finished(r)
        if (r.n_frames >= r.next_end or r.state is S.DRAINING) and not r.chunk_inflight \
                and r.id not in self.pending:
            return self._advance_chunks(r, now)
        return []

    def fail(self, request_id: int, now: float, reason: str) -> list[Event]:
        """End a request as failed for a reason outside this engine (the other role's replica died)."""
        r = self.requests.get(request_id)
        return [] if r is None else self._end(r, S.FAILED, now, reason)

    # ------------------------------------------------------------------ endings
    def _end(self, r: Request, state: RequestState, now: float, reason: str | None) -> list[Event]:
        self._log.detach(r)
        r.next_ready = None  # (it refers back to r: no cycle left for the GC)
        if r.state is S.QUEUED:
            try:
                self.waiting.remove(r)
            except ValueError:
                pass  # a rejected request never entered the queue
        if self._decode_all and r.id in self.decoding:
            r.lm_inflight = True  # it is in the decode step now running (see _launch_decode)
        if r.lm_inflight:
            self._ended_in_lm.add(r.id)
        if self.decoding.pop(r.id, None) is not None:
            self._decode_batch = None
            self.decoding_rows -= r.prompt.width
        if r.id in self.pending:
            self._unpend(self.pending[r.id])
        self.requests.pop(r.id, None)
        r.state = state
        r.reason = reason
        if self.gate is not None:
            self.gate.forget(r)
        tl = r.timeline
        tl.status, tl.reason, tl.finished, tl.frames = state.value, reason, now, r.n_frames
        events: list[Event] = [Ended(r, now)]
        if not self.waiting:
            self.defer_since = None  # nothing left to defer
        return events + self._maybe_release(r)

    def _maybe_release(self, r: Request) -> list[Event]:
        """Pages and slot go back as soon as no batch in flight still uses them."""
        if r.lm_inflight or r.chunk_inflight:
            return []
        had = bool(r.pages) or r.slot >= 0
        if r.pages:
            self.kv.release(r.pages, r.id)
            r.pages = []
        if r.slot >= 0:
            self.slots.release(r.slot, r.id)
            r.slot = -1
        return [Released(r)] if had else []


_row_of = attrgetter("row")
_NO_ROWS: list[Request] = []  # read-only
_frame_of = attrgetter("frame")
_done_of = attrgetter("done")
_join_seq_of = attrgetter("join_seq")


def _stack_frames(flat: list[Any]) -> np.ndarray:
    """np.array(flat) of a codec batch's frames ([n, *frame shape]), built by joining their bytes: numpy
    builds an array from a list of arrays at ~0.1 us per element (a fifth of a 32-chunk launch's host
    time), a join of their buffers is one C loop at a third of that. The frames of one engine come from
    one program's decode (or from an LM engine's, role codec), so they share a dtype and shape; the join is
    taken when the first and last frames are C-contiguous ndarrays of one dtype (numpy's builtin dtypes
    are singletons) and the bytes add up to n frames of the first one's size, and np.array decides
    otherwise (lists, tensors, strided views, frames of other sizes: it raises as before). Checking every
    frame's dtype and shape would cost as much as the join saves, so a batch whose middle frames mix
    dtypes of one itemsize, or sizes that happen to add up, is joined: both are a program's bug either
    way (np.array would promote the codes to float, or refuse them). Writeable, as np.array's result."""
    f0, f1 = flat[0], flat[-1]
    if f0.__class__ is np.ndarray and f1.__class__ is np.ndarray and f0.dtype is f1.dtype:
        try:
            raw = bytearray().join(flat)
        except (BufferError, TypeError, ValueError):  # not C-contiguous, not a buffer
            raw = None
        if raw is not None and len(raw) == len(flat) * f0.nbytes:
            return np.frombuffer(raw, f0.dtype).reshape(len(flat), *f0.shape)
    return np.array(flat)


def _join_order(row: tuple[Request, Any]) -> int:
    return row[0].join_seq


def _rows(reqs: Iterable[Request]) -> int:
    """Rows (sequences per forward pass) of a set of requests: a CFG pair counts 2."""
    return sum(r.prompt.width for r in reqs)


def _chunk_order(ch: Chunk) -> tuple[float, int]:
    return (ch.deadline, ch.request.id)


def _describe(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def _stage_reason(stage: str, c: Completion) -> str:
    if c.error is not None:
        return f"the {stage} stage failed: {_describe(c.error)}"
    return f"the {stage} stage returned {0 if c.result is None else len(c.result)} results for " \
           f"{len(c.work.rows)} rows"
