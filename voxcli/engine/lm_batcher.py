"""The LM batcher: the queue, the running rows and their KV pages, what the next LM batch is, and what
its results do (the decode hot path).

It owns: the waiting queue, the running rows (`decoding`, in admission order) and their row counts, the
KV page pool, the frame log (frame_log.py) and the due-step index of the hot path, and the slack keys.
Chunks a row completes go to its `ChunkSink` (chunk_sink.py): the codec batcher (role both) or a hand-off
sink (role lm, handoff.py); the codec slot table, when it is given one, is the codec batcher's, from which
a prefill takes each request's slot. Requests end through the request book (request_book.py).

The next batch: a prefill takes the queue's head in order (no overtaking: a big request is not starved
by small ones) while pages, a codec slot (a hand-off engine holds none), codec state and a running row
are free for each request, up to max_prefill_batch rows and max_prefill_tokens. A deadline-aware
admission policy (admission_policies.py) defers it while the smallest running slack is below its
estimated duration, never `max_defer_s` or more in a row. Otherwise one decode step: every running row
when they fit the largest decode bucket, else the bucket filled least slack first (deadline-aware) or in
admission order.

Rows: a request whose prompt has `width` w (a CFG pair) is one Request but w rows: it counts w toward
`max_running`, `max_prefill_batch`, the largest decode bucket and the bucket of every LM batch holding
it, and is never split across batches. Prefill tokens count `length * width`.

The hot path: a decode step of every running row (`_decode_logged`) runs no Python code per row. The
step's frames go into the frame log as one list, and only the rows with more to do than store a frame
are taken: the rows filed under this step (`_schedule_due`: the first frame, a chunk boundary, the frame
cap), rows done and rows without a frame, in batch order as a row-by-row pass (`_decode_rows`) would
take them, with the same decisions. At 256 rows the row-by-row pass is most of the host time of a step;
tests/test_scheduler_hot_path.py holds both paths to the same batches, timelines and audio. Everything
else (a prefill, a capped step, a row's error, a row done or without a frame) goes row by row
(`_lm_row`). The parts it calls per step are bound once, at construction, as attributes of this object.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from itertools import compress, count, repeat
from operator import attrgetter, is_
from typing import Any

from voxcli.config import EngineConfig
from voxcli.engine import text_pacing
from voxcli.engine.chunk_sink import ChunkSink
from voxcli.engine.codec_slots import CodecSlotTable
from voxcli.engine.estimates import LatencyEstimator
from voxcli.engine.events import Event
from voxcli.engine.executors.base import Completion, LaneName, Work
from voxcli.engine.frame_log import SETTLE_AFTER, FrameLog
from voxcli.engine.kv_cache import KVPagePool
from voxcli.engine.lanes import LaneLayout
from voxcli.engine.request import Request, RequestState, rows_of
from voxcli.engine.request_book import RequestBook
from voxcli.engine.stage_errors import describe, stage_reason
from voxcli.models.base import Row, StepOutput

S = RequestState


class LmBatcher:
    def __init__(self, config: EngineConfig, layout: LaneLayout, estimator: LatencyEstimator,
                 kv: KVPagePool, book: RequestBook, sink: ChunkSink, slots: CodecSlotTable | None,
                 key_lane: LaneName, deadline_admission: bool,
                 may_defer: Callable[[Request, float, float], bool]) -> None:
        """`slots`: the table each prefilled request takes a codec slot from (None: this engine holds
        none, its chunks leave it); `key_lane`: where a lone chunk decodes (the slack keys' codec call);
        `may_defer(head, prefill_s, now)`: the admission policy's say on deferring the head prefill."""
        self.config = config
        self.layout = layout
        self.est = estimator
        self.kv = kv
        self.max_decode = layout.largest("lm", "decode") if "lm" in layout.lanes else 0
        self._book = book
        self._requests = book.requests  # (read per row of a slow path; the book updates it in place)
        self._fed = book.fed
        self._slots = slots
        self._deadline_admission = deadline_admission
        self._may_defer = may_defer
        # where completed chunks go, bound once: the sink's pending chunks by request (read-only here),
        # how a chunk is queued there, how a request's next chunk is made ready, and whether chunks pass
        # on at once (a hand-off sink) instead of waiting in the sink
        self._sink_pending = sink.pending
        self._pend = sink.add
        self._advance = sink.advance
        self._passes_on = sink.passes_on

        self.waiting: deque[Request] = deque()
        self.decoding: dict[int, Request] = {}  # admission order
        self.prefilling = 0  # rows (sum of widths) in the prefill batch in flight
        self.decoding_rows = 0  # rows (sum of widths) of `decoding`
        self.defer_since: float | None = None
        # slack keys (slack = key - now, Request.slack_key): the decode step and a one-chunk codec call,
        # at the rows of the latest LM step (text_pacing.py reads them too)
        self.key_step = estimator.decode_step(1)
        self.key_codec1 = estimator.codec(key_lane, 1)
        self._key_lane = key_lane
        self._key_at: tuple[int, int] | None = None  # (rows, estimator version) of the two keys above
        self._ended_in_lm: set[int] = set()  # requests that ended while an LM batch held them
        self._decode_all = False  # a decode step of every running row is in flight
        # (requests, rows, bucket) of a step of every running row, kept until `decoding` changes: most
        # steps run the same rows as the one before, and the lists are read-only downstream
        self._decode_batch: tuple[list[Request], list[Row], int] | None = None
        # the hot path: a step of every running row goes into the frame log whole, and touches only the
        # rows filed under that step (`_schedule_due`), not every row
        self._log = FrameLog()
        self.settle = self._log.settle  # a row's logged frames into r.frames (a chunk's launch needs them)
        self._log_all = True  # the next logged step attaches every row (none attached, or flushed)
        self._joiners: list[Request] = []  # rows that started running since the last logged step
        self._step_no = 0  # steps of every running row completed: the clock of `_due`
        self._due: dict[int, list[Request]] = {}  # step number -> rows due then (stale entries skipped)
        self._due_ok = True  # False after a capped step (not every row advanced): rebuilt at the next
        self._join_seq = 0  # running rows in admission order (`Request.join_seq`): batch order

    # ------------------------------------------------------------------ what it holds
    @property
    def idle(self) -> bool:
        """No request running or prefilling: nothing more will come from the LM for now."""
        return not self.decoding and not self.prefilling

    def drop(self, r: Request) -> None:
        """The request ended (request_book.py): out of the queue, the running rows and the log."""
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
        if not self.waiting:
            self.defer_since = None  # nothing left to defer

    def release(self, r: Request) -> bool:
        """Its KV pages go back (no batch in flight uses them): True when it held some."""
        if not r.pages:
            return False
        self.kv.release(r.pages, r.id)
        r.pages = []
        return True

    # ------------------------------------------------------------------ the next batch
    def lm_work(self, now: float) -> Work | None:
        cands = self._prefill_candidates() if self.waiting else []
        if cands:
            admit = True
            if self._deadline_admission and self.decoding:
                est = self.est.prefill(sum(r.prompt.length * r.prompt.width for r in cands), rows_of(cands))
                ks, kc = self.key_step, self.key_codec1
                min_slack = min([r.slack_key(ks, kc) for r in self.decoding.values()]) - now
                if min_slack < est and self._may_defer(cands[0], est, now):
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

    def _prefill_candidates(self) -> list[Request]:
        cfg = self.config
        room = min(cfg.max_running - self.decoding_rows - self.prefilling, cfg.max_prefill_batch)
        table = self._slots
        # without a slot table the chunks leave this engine: no slot or codec state to budget
        slots = table.free if table is not None else len(self.waiting)
        state = table.state_free if table is not None else None  # None: no growing codec state to budget
        pages, tokens, rows = self.kv.free, 0, 0
        out: list[Request] = []
        for r in self.waiting:  # FIFO, no overtaking: a big request is not starved by small ones
            w = r.prompt.width
            if rows + w > room or r.need_pages > pages or slots < 1:
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

    def _launch_prefill(self, cands: list[Request], now: float) -> Work:
        rows: list[Row] = []
        table = self._slots
        for r in cands:
            self.waiting.popleft()  # candidates are the queue's head, in order
            r.pages = self.kv.allocate(r.need_pages, r.id)
            # a hand-off engine holds no codec slot: its chunks' codec state lives in the codec engine
            slot = table.acquire(r.id, r.state_bytes) if table is not None else -1
            assert slot is not None  # checked by _prefill_candidates
            r.slot = slot
            r.row = Row(request_id=r.id, prompt=r.prompt, pages=r.pages, slot=slot)
            r.state = S.PREFILL
            r.lm_inflight = True
            r.timeline.admitted = now
            r.timeline.status = S.PREFILL.value
            rows.append(r.row)
        n = rows_of(cands)
        self.prefilling += n
        return Work(lane="lm", stage="prefill", rows=rows, bucket=n, tag=cands,
                    tokens=sum(r.prompt.length * r.prompt.width for r in cands))

    def _launch_decode(self, now: float) -> Work | None:
        # rows whose text is still arriving sit out while far ahead of playback (text_pacing.py)
        paced = text_pacing.paced(self._fed, self.key_step, self.key_codec1, now) if self._fed else None
        if not paced and self.decoding_rows <= self.max_decode:
            # every running row: `_decode_all` stands for their lm_inflight flags (no per-row writes;
            # `drop` sets the flag of a row that ends while the step runs)
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
                                    if self._deadline_admission else self.decoding.values())
        reqs, rows = [], 0
        for r in order:
            if paced and r.id in paced:
                continue
            if rows + r.prompt.width <= self.max_decode:
                reqs.append(r)
                rows += r.prompt.width
                if rows == self.max_decode:
                    break
        if not reqs:
            return None  # every running row is paced: the next one is due at a timer (next_timer)
        for r in reqs:
            r.lm_inflight = True
        return Work(lane="lm", stage="decode", rows=list(map(_row_of, reqs)),
                    bucket=self.layout.bucket_for("lm", "decode", rows_of(reqs)), tag=reqs)

    def _key(self, r: Request) -> float:
        """LM slack key (slack = key - now): the deadline of the chunk under generation, less the
        decode steps its remaining frames need and a one-chunk codec call."""
        return r.slack_key(self.key_step, self.key_codec1)

    # ------------------------------------------------------------------ results
    def complete(self, c: Completion) -> list[Event]:
        work = c.work
        reqs: list[Request] = work.tag
        events: list[Event] = []
        now = c.finished
        prefill = work.stage == "prefill"
        decode_all = self._decode_all
        if prefill:
            self.prefilling -= rows_of(reqs)
        else:
            self._decode_all = False
        if c.error is not None or c.result is None or len(c.result) != len(reqs):
            reason = stage_reason(work.stage, c)
            book = self._book
            for r in reqs:
                r.lm_inflight = False
                if r.state.terminal:
                    events += book.maybe_release(r)
                else:
                    events += book.end(r, S.FAILED, now, reason)
            return events
        # slack keys are computed on demand (_key) from the step estimate of the latest LM step (both
        # follow the estimator's measured scale on real-clock executors; asked again only when the rows
        # or the estimator changed)
        est = self.est
        at = (self.decoding_rows + (rows_of(reqs) if prefill else 0), est.version)
        if at != self._key_at:
            self._key_at = at
            self.key_step = est.decode_step(at[0])
            self.key_codec1 = est.codec(self._key_lane, 1)
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
        """The hot path: the step's frames into the log, then the rows due, done or frameless (settled
        first). None (use `_decode_rows`) when a row's result is an error."""
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
        log, decoding, pending, pend = self._log, self.decoding, self._sink_pending, self._pend
        steps, passes_on, due_at = log.steps, self._passes_on, self._due
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
            if n < next_end or n >= cap or n == 1 or passes_on or r.chunk_inflight or rid in pending:
                events += self._frame_stored(r, n, now)
                continue
            # _frame_stored: next_event is the cap (the chunk is complete); _pend_next; _schedule_due
            r.next_event = cap
            ch = r.next_ready
            if ch is not None and ch.start == r.next_start and ch.end == next_end:  # made at its delivery
                r.next_ready = None
                ch.t_ready = now
            else:
                ch = r.chunk_to(next_end, False, now)
            pend(ch)
            at = step + (cap - n if cap - n > 1 else 1)
            r.due_step = at
            got = due_at.get(at)
            if got is None:
                due_at[at] = [r]
            else:
                got.append(r)
        return events

    def _flush_log(self) -> None:
        """Settle every logged row: the paths other than a step of every row store frames directly."""
        if self._log.current is not None:
            self._log.flush()
            self._log_all = True

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

    def _lm_row(self, r: Request, out: Any, now: float, stage: str) -> list[Event]:
        """One row's result of an LM batch (prefill or decode); the row's frames are all in r.frames."""
        events = self._lm_row_result(r, out, now, stage)
        self._schedule_due(r)
        return events

    def _lm_row_result(self, r: Request, out: Any, now: float, stage: str) -> list[Event]:
        r.lm_inflight = False
        if r.id not in self._requests:  # cancelled or failed while the batch ran
            return self._book.maybe_release(r)
        if isinstance(out, BaseException):  # a per-row error: this request alone fails
            return self._book.end(r, S.FAILED, now, f"the {stage} stage failed: {describe(out)}")
        if stage == "prefill":  # it starts running
            r.state = S.DECODE
            r.timeline.status = S.DECODE.value
            self.decoding[r.id] = r
            self._decode_batch = None
            r.join_seq = self._join_seq
            self._join_seq += 1
            self._joiners.append(r)
            self.decoding_rows += r.prompt.width
        if out.text_tokens:  # a text answer's tokens (TTFT, tokens/s: Timeline)
            tl = r.timeline
            if tl.first_token is None:
                tl.first_token = now
            tl.last_token, tl.text_tokens = now, tl.text_tokens + out.text_tokens
        if out.frame is not None:
            if r.n_frames == 0:
                r.timeline.first_frame = now
            r.add_frame(out.frame)
        if out.done or r.n_frames >= r.frame_cap:
            self._lm_finished(r)
        if (r.n_frames >= r.next_end or r.state is S.DRAINING) and not r.chunk_inflight \
                and r.id not in self._sink_pending:
            return self._advance(r, now)
        return []

    # ------------------------------------------------------------------ frames into chunks
    def _lm_finished(self, r: Request) -> None:
        r.drain()
        del self.decoding[r.id]
        self._decode_batch = None
        self._log.detach(r)
        self.decoding_rows -= r.prompt.width
        # the LM will never touch these pages again: hand them back now, before the codec drains
        if r.pages:
            self.kv.release(r.pages, r.id)
            r.pages = []

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

    def _frame_stored(self, r: Request, n: int, now: float) -> list[Event]:
        """`_lm_row` of a running row's plain frame (not done) already stored (in r.frames or the log;
        n = r.n_frames), `add_frame`'s, the sink's `advance` and `_schedule_due`'s steps inlined: its
        first frame, the frame cap, or the frame completing the next chunk."""
        if n == 1:
            r.timeline.first_frame = now
        cap, next_end = r.frame_cap, r.next_end
        ev = next_end if next_end > n else cap  # refresh_event
        r.next_event = ev = ev if ev < cap else cap
        if n >= cap:
            self._lm_finished(r)
            if not r.chunk_inflight and r.id not in self._sink_pending:
                return self._advance(r, now)
            return []
        if n >= next_end and not r.chunk_inflight and r.id not in self._sink_pending:
            if self._passes_on:  # the chunk leaves the engine now (a hand-off sink)
                events = self._advance(r, now)
                self._schedule_due(r)
                return events
            self._pend(r.chunk_to(next_end, False, now))  # never its last chunk: the LM goes on
        step = self._step_no + (ev - n if ev - n > 1 else 1)  # _schedule_due (n >= 1: it has a frame)
        if step != r.due_step:
            r.due_step = step
            self._due.setdefault(step, []).append(r)
        return []

    def chunk_delivered(self, r: Request, next_end: int, now: float) -> list[Event]:
        """A running request's chunk was delivered (the codec batcher, codec_batcher.py) and its next
        one ends at `next_end`: refresh_event, _schedule_due and the sink's advance inlined. Its next
        chunk is pended now if complete, else made now, while its bounds are at hand, and pended when
        its last frame comes (_due_frames)."""
        n = len(r.frames)
        if r.log_epoch is not None:
            n += self._log.steps - r.log_from
        cap = r.frame_cap
        ev = next_end if next_end > n else cap
        r.next_event = ev = ev if ev < cap else cap
        step = self._step_no + (1 if n == 0 else (ev - n if ev - n > 1 else 1))
        if step != r.due_step:
            r.due_step = step
            self._due.setdefault(step, []).append(r)
        if n >= next_end:
            self._pend(r.chunk_to(next_end, False, now))
        else:
            r.next_ready = r.chunk_to(next_end, False, now)
        return _NO_EVENTS


_NO_ROWS: list[Request] = []  # read-only
_NO_EVENTS: list[Event] = []  # read-only
_row_of = attrgetter("row")
_frame_of = attrgetter("frame")
_done_of = attrgetter("done")
_join_seq_of = attrgetter("join_seq")


def _join_order(row: tuple[Request, Any]) -> int:
    return row[0].join_seq
