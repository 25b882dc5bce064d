"""Chunk progression: frames become chunks, chunks go to the codec one at a time per request, and a
delivered chunk lets the next one go.

A request's next chunk becomes dispatchable only after its previous chunk has left the engine
(delivered, or handed off by role lm), and once all of its frames exist (or the LM has finished and it
is the short tail). Here: the LM finishing a request (`_lm_finished`: its KV pages go back at once), a
stored frame that completes a chunk (`_frame_stored`), making the next chunk dispatchable
(`_advance_chunks`, `_pend_next`), filing a running row under the decode step at which it next needs
attention (`_schedule_due`, the hot path's clock: decode_hot_path.py), and a codec batch's completion
(`_complete_codec`: deliveries, timelines, the next chunk of each request).

Chunks are built by `Request.chunk_to` and moved on by `Request.chunk_left` (engine/request.py) only.
"""

from __future__ import annotations

import numpy as np

from voxcli.engine.endings import Endings
from voxcli.engine.events import Delivered, Event, HandedOff
from voxcli.engine.executors.base import Completion
from voxcli.engine.request import Chunk, ChunkRecord, Request
from voxcli.engine.scheduler_state import S, describe, stage_reason


class ChunkFlow(Endings):
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

    def _pend_next(self, r: Request, now: float) -> None:
        """`_advance_chunks` of a running request whose next chunk is complete: never its last chunk (the
        LM has not finished), and it ends at next_end (= next_start + its size, request.py)."""
        self.chunks.add(r.chunk_to(r.next_end, False, now))

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

    def _advance_chunks(self, r: Request, now: float) -> list[Event]:
        """Make the request's next chunk dispatchable if it is ready; finish a request with no chunks."""
        bounds = r.ready_chunk_bounds()
        if bounds is None:
            if r.state is S.DRAINING and r.next_chunk == 0:  # the LM produced no frame at all
                return self._end(r, S.DONE, now, None)
            return []
        start, end, last = bounds
        chunk = r.chunk_to(end, last, now)
        if self.handoff:
            if len(r.frames) < end:  # its frames are still in the frame log (frame_log.py)
                self._log.settle(r)
            codes = np.array(r.frames[start:end]) if end > start else self.empty_codes
            return [HandedOff(r, chunk, codes, now), *self._chunk_done(r, chunk, now)]
        self.chunks.add(chunk)
        return []

    def _chunk_done(self, r: Request, ch: Chunk, now: float) -> list[Event]:
        """Chunk `ch` left the engine (handed off): the next one may go."""
        r.chunk_left(ch)
        if ch.last:
            return self._end(r, S.DONE, now, None)
        r.refresh_event()
        return self._advance_chunks(r, now)

    def _complete_codec(self, c: Completion) -> list[Event]:
        """A codec batch came back: each chunk is delivered (or its request fails) and lets its
        request's next chunk go (`_chunk_done`'s steps, inlined for a running request)."""
        chunks: list[Chunk] = c.work.tag
        events: list[Event] = []
        now = c.finished
        failed = c.error is not None or c.result is None or len(c.result) != len(chunks)
        reason = stage_reason("codec", c) if failed else None
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
                events += self._end(r, S.FAILED, now, f"the codec stage failed: {describe(pcm)}")
                continue
            index, frames = ch.index, ch.end - ch.start
            audio_s = frames * frame_s if r.hold_s == 0.0 else r.released_audio_s(ch)
            r.timeline.chunks.append(ChunkRecord(index, ch.start, frames, ch.t_ready, ch.t_dispatched, now,
                                                 audio_s, ch.lane, ch.deadline if index else None))
            if index == 0:
                r.t_first_audio = now
                r.timeline.first_audio = now
                self.admission.first_audio(r, now)
            append(Delivered(r, ch, pcm, now))
            next_end = r.chunk_left(ch)
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
                r.next_ready = r.chunk_to(next_end, False, now)
        return events
