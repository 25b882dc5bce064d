"""An LM batch's results (prefill or decode): frames stored, chunks completed, rows started or finished.

A decode step of every running row takes the hot path (`_decode_logged`), with no Python code per row.
The step's frames go into the frame log (frame_log.py) as one list, and only the rows with more to do
than store a frame are taken: the rows filed under this step (`_schedule_due`, chunk_flow.py: the first
frame, a chunk boundary, the frame cap), rows done and rows without a frame, in batch order as a
row-by-row pass (`_decode_rows`) would take them, with the same decisions. At 256 rows the
row-by-row pass is most of the host time of a step; tests/test_scheduler_hot_path.py holds both paths to
the same batches, timelines and audio. Everything else (a prefill, a capped step, a row's error, a
row done or without a frame) goes row by row (`_lm_row`); a failed batch fails its requests.
"""

from __future__ import annotations

from itertools import compress, count, repeat
from operator import attrgetter, is_
from typing import Any

from voxcli.engine.chunk_flow import ChunkFlow
from voxcli.engine.events import Event
from voxcli.engine.executors.base import Completion
from voxcli.engine.frame_log import SETTLE_AFTER
from voxcli.engine.request import Request
from voxcli.engine.scheduler_state import S, describe, rows_of, stage_reason
from voxcli.models.base import StepOutput


class LmCompletion(ChunkFlow):
    def _complete_lm(self, c: Completion) -> list[Event]:
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
            for r in reqs:
                r.lm_inflight = False
                if r.state.terminal:
                    events += self._maybe_release(r)
                else:
                    events += self._end(r, S.FAILED, now, reason)
            return events
        # slack keys are computed on demand (LmLane._key) from the step estimate of the latest LM step
        # (both follow the estimator's measured scale on real-clock executors; asked again only when
        # the rows or the estimator changed)
        est = self.est
        at = (self.decoding_rows + (rows_of(reqs) if prefill else 0), est.version)
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
        log, decoding, pending, pend = self._log, self.decoding, self.pending, self.chunks.add
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
        if r.id not in self.requests:  # cancelled or failed while the batch ran
            return self._maybe_release(r)
        if isinstance(out, BaseException):  # a per-row error: this request alone fails
            return self._end(r, S.FAILED, now, f"the {stage} stage failed: {describe(out)}")
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
                and r.id not in self.pending:
            return self._advance_chunks(r, now)
        return []


_NO_ROWS: list[Request] = []  # read-only
_frame_of = attrgetter("frame")
_done_of = attrgetter("done")
_join_seq_of = attrgetter("join_seq")


def _join_order(row: tuple[Request, Any]) -> int:
    return row[0].join_seq
