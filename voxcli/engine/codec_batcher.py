"""The codec batcher: the dispatchable chunks, the codec slot table, and which chunks each codec batch
takes, when a background batch launches, building the batch and what its results do.

It owns: the pending chunks (pending.py: at most one per request, ordered by deadline), the codec slot
table (codec_slots.py: a prefill takes a slot from it, the LM batcher's `slots`), the background lane's
batch threshold and load, and the late-chunk counters. Frames come from a `FrameSource` (chunk_sink.py):
the LM batcher, or a remote frame source in a codec-only engine; a running request's delivered chunk is
handed back to it (`chunk_delivered`: its due step and next chunk). Requests end through the request
book.

  urgent lane       first chunks and chunks within the urgent margin of their deadline (late_urgent),
                    in deadline order up to the largest urgent bucket ("promoted": later chunks on it)
  background lane   the other chunks in deadline order up to its largest bucket, launched when at least
                    B are ready (adaptive_batching: B follows the lane's load), when an urgent chunk
                    needs it (no urgent lane), when the LM has nothing left, or by the deadline trigger
                    (deadline_launch): the last moment the batch ends before its first chunk turns
                    urgent; with slack_cap cut to what ends in time (below)
  every ready chunk one batch of all, deadline order (the sync policies)

The lane policy (lane_policies.py) decides which of these to ask for; `timers` says when a waiting
decision could change without a completion. A request's next chunk becomes dispatchable only after its
previous chunk has been delivered (`complete`), and once all of its frames exist (or it is the tail).
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import merge
from itertools import islice
from typing import Any

import numpy as np

from voxcli.config import EngineConfig
from voxcli.engine.chunk_sink import FrameSource, produced_nothing, ready_chunk
from voxcli.engine.codec_slots import CodecSlotTable
from voxcli.engine.estimates import LatencyEstimator
from voxcli.engine.events import Delivered, Event
from voxcli.engine.executors.base import Completion, LaneName, Work
from voxcli.engine.frame_log import settle
from voxcli.engine.lane_policies import LanePolicy
from voxcli.engine.lanes import LaneLayout
from voxcli.engine.pending import PendingChunks, chunk_order
from voxcli.engine.request import Chunk, ChunkRecord, Request, RequestState
from voxcli.engine.request_book import RequestBook
from voxcli.engine.stage_errors import describe, stage_reason
from voxcli.models.base import CodecItem

S = RequestState


class CodecBatcher:
    passes_on = False  # chunks wait here for a codec batch (chunk_sink.py)

    def __init__(self, config: EngineConfig, layout: LaneLayout, estimator: LatencyEstimator,
                 lane_policy: LanePolicy, slots: CodecSlotTable, book: RequestBook, codebooks: int,
                 frame_s: float, on_first_audio: Callable[[Request, float], None]) -> None:
        """`on_first_audio(r, now)`: the admission policy's hook for a request's first audio."""
        self.config = config
        self.layout = layout
        self.est = estimator
        self.slots = slots
        self._book = book
        self._requests = book.requests
        self._frame_s = frame_s
        self._on_first_audio = on_first_audio
        self._source: FrameSource | None = None  # set by `feed_from` (the wiring, scheduler.py)
        self.empty_codes = np.zeros((0, codebooks), dtype=np.int64)
        # dispatchable chunks, at most one per request (pending.py); the hot paths use the aliases
        self.chunks = PendingChunks()
        self._pending = self.chunks.by_request
        self._firsts = self.chunks.firsts
        self._order = self.chunks.order
        # batch caps and buckets come from the lane plan (lanes.py), the table the executors build from
        lanes = layout.lanes
        self.max_urgent = layout.largest("urgent", "codec") if "urgent" in lanes else 0
        self.max_background = layout.largest("background", "codec") if "background" in lanes else 0
        self.margin = config.urgent_margin_s
        self._deadline_batches = lane_policy.deadline_batches
        self._adaptive = config.adaptive_batching
        # background batch threshold B; with adaptive_batching it follows the lane's measured load
        self._bg_min = config.background_min_batch
        self._bg_load = 0.0  # exponential average of the background lane's busy fraction
        self._bg_last = 0.0  # when its previous batch finished
        # the late-chunk path (config late_urgent / deadline_launch): later chunks launched on the urgent
        # lane ("promoted") and background batches launched below B by their deadline trigger alone
        self.late_urgent = config.late_urgent
        self.deadline_launch = config.deadline_launch
        # config slack_cap: background batches cut by their chunks' slack ("slack_cuts"); only with an
        # urgent lane to leave the chunks that no batch can end in time to
        self.slack_cap = config.slack_cap and lane_policy.has_urgent_lane
        self.counts = {"promoted": 0, "deadline_launches": 0, "slack_cuts": 0}
        self._bg_padded: dict[tuple[int, int], tuple[int, int]] = {}  # (chunks, frames) -> (bucket, frames)

    def feed_from(self, source: FrameSource) -> None:
        """Where this batcher's frames come from (the LM batcher or a remote frame source)."""
        self._source = source

    @property
    def background_min(self) -> int:
        """The background lane's batch threshold B now (adaptive_batching moves it)."""
        return self._bg_min

    # ------------------------------------------------------------------ what it holds
    @property
    def pending(self) -> dict[int, Chunk]:
        """The dispatchable chunk of each request that has one (read-only outside)."""
        return self._pending

    def add(self, ch: Chunk) -> None:
        self.chunks.add(ch)

    def advance(self, r: Request, now: float) -> list[Event]:
        """Make the request's next chunk dispatchable if it is ready; finish a request with no chunks."""
        ch = ready_chunk(r, now)
        if ch is None:
            return self._book.end(r, S.DONE, now, None) if produced_nothing(r) else []
        self.chunks.add(ch)
        return []

    def drop(self, r: Request) -> None:
        """The request ended (request_book.py): its dispatchable chunk goes."""
        ch = self._pending.get(r.id)
        if ch is not None:
            self.chunks.remove(ch)

    def release(self, r: Request) -> bool:
        """Its codec slot goes back (no batch in flight uses it): True when it held one."""
        if r.slot < 0:
            return False
        self.slots.release(r.slot, r.id)
        r.slot = -1
        return True

    # ------------------------------------------------------------------ the next batch
    def urgent_prefix(self, now: float) -> int:
        """How many chunks at the front of the deadline order are within the urgent margin of their
        deadline (none with late_urgent off: later chunks then stay in the background lane however late)."""
        return self.chunks.urgent_prefix(now, self.margin) if self.late_urgent else 0

    def urgent_batch(self, now: float) -> Work | None:
        if not self._pending:
            return None
        n_near = self.urgent_prefix(now)
        if not n_near and not self._firsts:
            return None
        near = self.chunks.chunks(self._order[: min(n_near, self.max_urgent)])
        if self._firsts:
            batch = list(islice(merge(self.chunks.sorted_firsts(), near, key=chunk_order), self.max_urgent))
            if near:
                self.counts["promoted"] += sum(ch.index > 0 for ch in batch)
        else:  # later chunks only (the steady state under load): already in order, all promoted
            batch = near
            self.counts["promoted"] += len(batch)
        return self._launch_codec("urgent", batch, now)

    def background_batch(self, now: float, urgent_lane: bool) -> Work | None:
        if not self._pending:
            return None
        if urgent_lane:
            i0 = self._background_start(now)
            batch = self.chunks.chunks(self._order[i0: i0 + self.max_background])
            if not batch:
                return None
            force = False
        else:
            batch = self.chunks.in_order(self.max_background)
            force = bool(self._firsts) or self.urgent_prefix(now) > 0
        if not (force or len(batch) >= self._bg_min or self._source_idle()):
            if not (self.deadline_launch and now >= self._background_trigger(batch)):
                return None
            self.counts["deadline_launches"] += 1  # below B, launched only so it is not late
        if urgent_lane and self.slack_cap:
            n = self._slack_fit(batch, now)
            if n < len(batch):
                self.counts["slack_cuts"] += 1
                batch = batch[:n]
        return self._launch_codec("background", batch, now)

    def codec_all(self, now: float) -> Work | None:
        if not self._pending:
            return None
        return self._launch_codec("background", self.chunks.in_order(self.max_background), now)

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
    # (measured, voxcli/bench/plans/late_chunks.toml at 112/16: cutting at deadline - margin there starved the
    # lane of batch size and stalled more than no cap at all). Durations are estimated at the bucket the
    # batch runs in (padded rows cost like real ones, as the executors run them).
    def _background_start(self, now: float, i: int | None = None) -> int:
        """Index in the deadline order of the background lane's first candidate: past the urgent prefix
        (`i`, when the caller has it) and, with the slack cap, past the chunks the urgent lane will
        deliver sooner than even a batch of one."""
        if i is None:
            i = self.urgent_prefix(now)
        if not (self.slack_cap and self.late_urgent):
            return i
        order, pending, alone = self._order, self._pending, self._alone
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

    def _source_idle(self) -> bool:
        """No more frames will come for now (the LM has nothing running or prefilling)."""
        return self._source is None or self._source.idle

    def timers(self, now: float, background_free: bool) -> list[float]:
        """Times at which a background decision could change with no completion: a chunk's promotion to
        the urgent lane, a waiting batch's deadline trigger (lane policies with deadline batches).
        `background_free`: no background batch is in flight."""
        times: list[float] = []
        if not (self._order and self._deadline_batches):
            return times
        i0 = self.urgent_prefix(now)
        if i0 < len(self._order):
            if self.late_urgent:
                times.append(self._order[i0][0] - self.margin)  # promotion to urgent
            if self.deadline_launch and background_free:
                i = self._background_start(now, i0) if self.slack_cap else i0
                batch = self.chunks.chunks(self._order[i: i + self.max_background])
                if batch:
                    times.append(self._background_trigger(batch))
        return times

    def _launch_codec(self, lane: LaneName, chunks: list[Chunk], now: float) -> Work:
        flat: list[Any] = []  # every frame of the batch: one array build, then a view per chunk
        pending, firsts = self._pending, self._firsts
        keys: list[tuple[float, int]] = []  # the continuation chunks' order entries, in order
        for ch in chunks:
            r = ch.request
            frames, end = r.frames, ch.end
            if len(frames) < end:  # its frames are still in the frame log (frame_log.py)
                settle(r)
            rid = r.id
            del pending[rid]  # PendingChunks.remove, the order entries below at once
            if ch.index == 0:
                del firsts[rid]
            else:
                keys.append((ch.deadline, rid))
            r.chunk_inflight = True
            ch.t_dispatched = now
            ch.lane = lane
            flat += frames[ch.start:end]
        if keys:
            self.chunks.remove_keys(keys)
        empty = self.empty_codes
        codes_all = stack_frames(flat) if flat else empty
        items: list[CodecItem] = []
        append, frames = items.append, 0
        for ch in chunks:
            a, b = frames, frames + ch.end - ch.start
            append(CodecItem(ch.request.slot, codes_all[a:b] if b > a else empty, ch.index == 0, ch.last))
            frames = b
        bucket = self.layout.bucket_for(lane, "codec", len(items))
        return Work(lane=lane, stage="codec", rows=items, bucket=bucket, tag=chunks, frames=frames)

    # ------------------------------------------------------------------ results
    def complete(self, c: Completion) -> list[Event]:
        """A codec batch came back: each chunk is delivered (or its request fails) and lets its
        request's next chunk go (a running request's through its frame source: `chunk_delivered`)."""
        if c.work.lane == "background" and self._adaptive:
            self._adapt_background(c)
        chunks: list[Chunk] = c.work.tag
        events: list[Event] = []
        now = c.finished
        failed = c.error is not None or c.result is None or len(c.result) != len(chunks)
        reason = stage_reason("codec", c) if failed else None
        decode, draining, frame_s, append = S.DECODE, S.DRAINING, self._frame_s, events.append
        book, ndarray, source = self._book, np.ndarray, self._source
        delivered = source.chunk_delivered if source is not None else None
        results = c.result if not failed else [None] * len(chunks)
        for ch, pcm in zip(chunks, results, strict=True):
            r = ch.request
            r.chunk_inflight = False
            state = r.state
            if state is not decode and state is not draining and state.terminal:  # (terminal hashes the enum)
                events += book.maybe_release(r)
                continue
            if failed:
                events += book.end(r, S.FAILED, now, reason)
                continue
            if pcm.__class__ is not ndarray and isinstance(pcm, BaseException):
                events += book.end(r, S.FAILED, now, f"the codec stage failed: {describe(pcm)}")
                continue
            index, frames = ch.index, ch.end - ch.start
            audio_s = frames * frame_s if r.hold_s == 0.0 else r.released_audio_s(ch)
            r.timeline.chunks.append(ChunkRecord(index, ch.start, frames, ch.t_ready, ch.t_dispatched, now,
                                                 audio_s, ch.lane, ch.deadline if index else None))
            if index == 0:
                r.t_first_audio = now
                r.timeline.first_audio = now
                self._on_first_audio(r, now)
            append(Delivered(r, ch, pcm, now))
            next_end = r.chunk_left(ch)
            if ch.last:
                events += book.end(r, S.DONE, now, None)
                continue
            if r.state is not decode or delivered is None:
                r.refresh_event()
                events += self.advance(r, now)
                continue
            events += delivered(r, next_end, now)  # a running request: its source files it
        return events


def stack_frames(flat: list[Any]) -> np.ndarray:
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
