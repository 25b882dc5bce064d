"""An independent observer of the engine: wraps any executor, sees every launched Work and every
completion, and checks the engine's invariants from that outside view alone (it never asks the
scheduler what it thinks). Used by the sim and cpu invariant tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from voxcli.config import EngineConfig
from voxcli.engine.estimates import LatencyEstimator
from voxcli.engine.executors.base import Completion, Executor, Work


@dataclass
class _Req:
    arrival: float | None = None
    cancel_at: float | None = None
    prefilled_at: float | None = None
    pages: list[int] = field(default_factory=list)
    slot: int = -1
    frames: list[np.ndarray] = field(default_factory=list)
    lm_done: bool = False
    sent: int = 0  # frames handed to the codec so far
    chunks: int = 0
    chunk_in_flight: bool = False
    last_sent: bool = False
    t_first_audio: float | None = None
    dead: bool = False  # failed in a batch: nothing may be launched for it again


class Violation(AssertionError):
    pass


class Observer(Executor):
    def __init__(self, inner: Executor, config: EngineConfig, estimator: LatencyEstimator, frame_s: float,
                 check_deferral: bool = True) -> None:
        self.inner = inner
        self.realtime = getattr(inner, "realtime", True)
        self.cfg = config
        self.est = estimator
        self.frame_s = frame_s
        self.check_deferral = check_deferral
        self.reqs: dict[int, _Req] = {}
        self.slot_owner: dict[int, int] = {}
        self.page_owner: dict[int, int] = {}
        self.in_flight: dict[str, Work] = {}
        self.launched_at: dict[int, float] = {}
        self.streams: dict[int, Any] = {}  # request id -> AudioStream (set by the test harness)
        self.batch_ids: dict[int, list[int]] = {}  # batch -> request ids, as seen at launch
        self.log: list[tuple] = []  # every decision: (t, lane, stage, ids, bucket)
        self.defer_run_start: float | None = None
        self.counts = {"prefill": 0, "decode": 0, "urgent": 0, "background": 0, "bg_by_size": 0,
                       "bg_by_deadline": 0, "bg_by_idle": 0, "bg_by_urgent": 0, "bg_by_slack_cut": 0,
                       "max_defer_run": 0.0}

    # --- what the test tells us (arrivals and cancels are inputs, not scheduler state)
    def note_arrival(self, rid: int, t: float) -> None:
        self.reqs.setdefault(rid, _Req()).arrival = t

    def note_cancel(self, rid: int, t: float) -> None:
        self.reqs.setdefault(rid, _Req()).cancel_at = t

    def fail(self, msg: str) -> None:
        raise Violation(f"t={self.inner.now():.6f}: {msg}")

    # --- Executor interface
    def now(self) -> float:
        return self.inner.now()

    def busy(self, lane):  # type: ignore[override]
        return self.inner.busy(lane)

    def interrupt(self) -> None:
        getattr(self.inner, "interrupt", lambda: None)()

    def close(self) -> None:
        self.inner.close()

    def launch(self, work: Work) -> None:
        # The rules hold at the time the scheduler decided, not at the later clock reading of this
        # call: on a real clock under load the two differ (a chunk not urgent at decide time may be
        # by launch time), which made this observer report false violations.
        if work.decided_at is None or work.decided_at > self.inner.now() + 1e-9:
            self.fail(f"batch {work.batch_id} launched with decision time {work.decided_at}")
        t = work.decided_at
        if work.lane in self.in_flight:
            self.fail(f"lane {work.lane} launched while busy")
        if self.cfg.policy == "sync" and self.in_flight:
            self.fail("sync launched a second lane while one was busy")
        running = self.in_flight.values()
        if self.cfg.policy == "sync2" and any(self.launched_at[w.batch_id] != t for w in running):
            self.fail("sync2 launched while the previous iteration was still running")
        self.launched_at[work.batch_id] = t
        if work.stage == "prefill":
            ids = self._check_prefill(work, t)
        elif work.stage == "decode":
            ids = self._check_decode(work, t)
        else:
            ids = self._check_codec(work, t)
        self.log.append((round(t, 9), work.lane, work.stage, tuple(ids), work.bucket))
        self.batch_ids[work.batch_id] = ids
        self.in_flight[work.lane] = work
        self.inner.launch(work)

    def wait(self, until):  # type: ignore[override]
        done = self.inner.wait(until)
        for c in done:
            self.in_flight.pop(c.work.lane, None)
            self._record(c)
        return done

    # --- launch checks
    def _eligible_waiting(self, t: float) -> bool:
        # a refused request (its stream says so) was never waiting for admission
        return any(q.arrival is not None and q.arrival <= t and q.prefilled_at is None
                   and (q.cancel_at is None or q.cancel_at > t)
                   and not (rid in self.streams and self.streams[rid].status == "rejected")
                   for rid, q in self.reqs.items())

    def _check_prefill(self, work: Work, t: float) -> list[int]:
        self.counts["prefill"] += 1
        self.defer_run_start = None
        ids = []
        for row in work.rows:
            q = self.reqs.setdefault(row.request_id, _Req())
            if q.prefilled_at is not None:
                self.fail(f"request {row.request_id} prefilled twice")
            if q.arrival is not None and t < q.arrival:
                self.fail(f"request {row.request_id} prefilled before it arrived")
            q.prefilled_at = t
            for p in row.pages:
                if p in self.page_owner and not self._gone(self.page_owner[p], t):
                    self.fail(f"KV page {p} given to {row.request_id} while held by {self.page_owner[p]}")
                self.page_owner[p] = row.request_id
            if row.slot in self.slot_owner and not self._gone(self.slot_owner[row.slot], t):
                self.fail(f"codec slot {row.slot} given to {row.request_id} while held by "
                          f"{self.slot_owner[row.slot]}")
            frames = row.prompt.fixed_frames if row.prompt.fixed_frames is not None else row.prompt.max_frames
            need = -(-(row.prompt.length + frames + 1) // self.cfg.kv_page_size)
            if len(row.pages) < need:
                self.fail(f"request {row.request_id} got {len(row.pages)} KV pages, needs {need}")
            self.slot_owner[row.slot] = row.request_id
            q.pages, q.slot = list(row.pages), row.slot
            ids.append(row.request_id)
        if len(work.rows) > self.cfg.max_prefill_batch:
            self.fail(f"prefill batch of {len(work.rows)} > max_prefill_batch")
        return ids

    def _gone(self, rid: int, t: float) -> bool:
        """The holder was cancelled and nothing of it is in flight: its pages and slot may be reused."""
        q = self.reqs[rid]
        if q.cancel_at is None or q.cancel_at > t or q.chunk_in_flight:
            return False
        lm = self.in_flight.get("lm")
        return lm is None or all(row.request_id != rid for row in lm.rows)

    def _not_cancelled(self, rid: int, t: float) -> None:
        if self.realtime:  # a real-clock cancel reaches the host loop a moment after it is issued
            return
        q = self.reqs[rid]
        if q.cancel_at is not None and q.cancel_at <= t:
            self.fail(f"work launched for request {rid} after it was cancelled at {q.cancel_at:.6f}")

    def _check_decode(self, work: Work, t: float) -> list[int]:
        self.counts["decode"] += 1
        if len(work.rows) > max(self.cfg.decode_buckets):
            self.fail(f"decode batch of {len(work.rows)} rows > largest decode bucket")
        if work.bucket not in self.cfg.decode_buckets or work.bucket < len(work.rows):
            self.fail(f"decode bucket {work.bucket} does not fit {len(work.rows)} rows")
        ids = []
        for row in work.rows:
            q = self.reqs.get(row.request_id)
            if q is None or q.prefilled_at is None or q.lm_done or q.dead:
                self.fail(f"decode of request {row.request_id} which is not generating")
            self._not_cancelled(row.request_id, t)
            ids.append(row.request_id)
        if self.check_deferral:
            if self._eligible_waiting(t):
                if self.cfg.admission == "prefill-first":
                    self.fail("prefill-first admission ran a decode step while a request waited")
                if self.defer_run_start is None:
                    self.defer_run_start = t
                run = t - self.defer_run_start
                self.counts["max_defer_run"] = max(self.counts["max_defer_run"], run)
                if run >= self.cfg.max_defer_s + 1e-9:
                    self.fail(f"prefill deferred {run * 1000:.1f} ms in a row "
                              f"(cap {self.cfg.max_defer_s * 1000} ms)")
            else:
                self.defer_run_start = None
        return ids

    def _deadline(self, q: _Req) -> float | None:
        if q.t_first_audio is None:
            return None
        return q.t_first_audio + q.sent * self.frame_s

    def _check_codec(self, work: Work, t: float) -> list[int]:
        ids, deadlines, any_urgent = [], [], False
        for item in work.rows:
            rid = self.slot_owner.get(item.slot)
            if rid is None:
                self.fail(f"codec item for slot {item.slot} that no live request holds")
            q = self.reqs[rid]
            self._not_cancelled(rid, t)
            if q.dead or q.last_sent:
                self.fail(f"chunk for request {rid} after it ended")
            if q.chunk_in_flight:
                self.fail(f"request {rid}: a chunk launched while its previous chunk is still decoding")
            if item.first != (q.chunks == 0):
                self.fail(f"request {rid}: chunk {q.chunks} has first={item.first}")
            n = item.codes.shape[0]
            if q.sent + n > len(q.frames):
                self.fail(f"request {rid}: chunk needs frames up to {q.sent + n} "
                          f"but only {len(q.frames)} exist")
            if n == 0 and not item.last:
                self.fail(f"request {rid}: empty chunk that is not the last")
            if n and not np.array_equal(item.codes, np.stack(q.frames[q.sent:q.sent + n])):
                self.fail(f"request {rid}: chunk codes are not frames {q.sent}..{q.sent + n}")
            if item.last and not (q.lm_done and q.sent + n == len(q.frames)):
                self.fail(f"request {rid}: last chunk before the LM finished or not covering every frame")
            if not item.last and n < self._min_chunk(q.chunks):
                self.fail(f"request {rid}: chunk {q.chunks} has {n} frames, schedule says "
                          f"{self._min_chunk(q.chunks)}")
            d = self._deadline(q)
            # near its deadline a later chunk is urgent (the urgent lane's, or it forces a lanes batch)
            # only with late_urgent on; off, it stays in the background lane however close
            urgent = item.first or (self.cfg.late_urgent and d is not None
                                    and d - t < self.cfg.urgent_margin_s)
            any_urgent |= urgent
            deadlines.append(d if d is not None else -1.0)
            q.chunk_in_flight = True
            q.pending_n = n  # type: ignore[attr-defined]
            ids.append(rid)
        n = len(work.rows)
        if work.lane == "urgent":
            self.counts["urgent"] += 1
            buckets = self.cfg.urgent_buckets
            if n > max(buckets) or work.bucket not in buckets or work.bucket < n:
                self.fail(f"urgent batch of {n} in bucket {work.bucket}")
            for item, d in zip(work.rows, deadlines, strict=True):
                if not item.first and not d - t < self.cfg.urgent_margin_s:
                    self.fail("urgent batch holds a chunk that is neither first nor near its deadline")
        else:
            self.counts["background"] += 1
            if n > max(self.cfg.background_buckets) or work.bucket < n:
                self.fail(f"background batch of {n} in bucket {work.bucket}")
            if self.cfg.policy in ("full", "lanes"):
                self._check_background_rule(work, t, deadlines, any_urgent)
        return ids

    def _min_chunk(self, index: int) -> int:
        return self.cfg.chunk.size(index)

    def _bg_seconds(self, n: int, frames: int) -> float:
        """A background batch's estimated duration as the slack cap prices it: at its bucket, padded rows
        costing like real ones."""
        bucket = next(b for b in self.cfg.background_buckets if b >= n)
        return self.est.codec("background", bucket, round(frames * bucket / n))

    def _check_background_rule(self, work: Work, t: float, deadlines: list[float], any_urgent: bool) -> None:
        cfg = self.cfg
        n = len(work.rows)
        if cfg.policy == "full" and any_urgent:
            self.fail("background batch holds an urgent chunk")
        capped = cfg.slack_cap and cfg.policy == "full"
        margin, d_min = cfg.urgent_margin_s, min(deadlines)
        sizes = [item.codes.shape[0] for item in work.rows]
        limit = float("inf")  # the earliest end the batch owes a chunk that could be in time alone
        # with late_urgent off no lane takes a chunk near its deadline: a batch owes it its deadline only
        owed = margin if cfg.late_urgent else 0.0
        if capped:
            for k, (d, f) in enumerate(zip(deadlines, sizes, strict=True)):
                end_by = d - owed + (self.est.codec("urgent", 1, f) if cfg.late_urgent else 0.0)
                if t + self._bg_seconds(1, f) <= end_by + 1e-9:
                    limit = min(limit, end_by)
                elif k == 0 and cfg.late_urgent and not self.realtime:
                    self.fail("background batch led by a chunk the urgent lane would deliver sooner")
            # the cap's promise: no background batch ends after the urgent lane would have delivered a
            # chunk of it that could be in time (sim only: a real clock's estimator corrects itself)
            if not self.realtime and t + self._bg_seconds(n, work.frames) > limit + 1e-9:
                self.fail(f"background batch of {n} ends after its first chunk would have turned urgent")
        if n >= cfg.background_min_batch:
            self.counts["bg_by_size"] += 1
            return
        if cfg.policy == "lanes" and any_urgent:
            self.counts["bg_by_urgent"] += 1
            return
        if "lm" not in self.in_flight:
            self.counts["bg_by_idle"] += 1
            return
        est = self._bg_seconds(n, work.frames) if capped else self.est.codec("background", n, work.frames)
        if d_min - t - est <= margin + 1e-9:
            self.counts["bg_by_deadline"] += 1
            return
        if capped:
            # cut by the cap: one more chunk (at most the largest size in sight) would have ended after
            # what it owes this batch's chunks or that chunk itself (its deadline is >= this batch's last)
            schedule = cfg.chunk
            biggest = max(sizes + ([schedule.first, schedule.steady, *schedule.ramp] if schedule else []))
            more = t + self._bg_seconds(n + 1, work.frames + biggest)
            if more > min(limit, max(deadlines) - owed) - 1e-9:
                self.counts["bg_by_slack_cut"] += 1
                return
        self.fail(f"background batch of {len(work.rows)} < B={cfg.background_min_batch} launched with "
                  f"{(d_min - t - est) * 1000:.1f} ms slack while the LM was busy")

    # --- completions
    def _record(self, c: Completion) -> None:
        w = c.work
        if w.stage in ("prefill", "decode"):
            for i, row in enumerate(w.rows):
                q = self.reqs[row.request_id]
                out: Any = None if c.result is None else c.result[i]
                if c.error is not None or isinstance(out, BaseException):
                    self._dead(row.request_id)
                    continue
                if out.frame is not None:
                    q.frames.append(out.frame)
                if out.done or len(q.frames) >= row.prompt.max_frames:
                    q.lm_done = True
                    for p in q.pages:
                        self.page_owner.pop(p, None)
                    if not q.frames:  # no audio at all: no chunk will come, the slot is free
                        q.last_sent = True
                        self.slot_owner.pop(q.slot, None)
            return
        for i, (item, rid) in enumerate(zip(w.rows, self.batch_ids.pop(w.batch_id), strict=True)):
            q = self.reqs[rid]
            q.chunk_in_flight = False
            out = None if c.result is None else c.result[i]
            if c.error is not None or isinstance(out, BaseException):
                self._dead(rid)
                continue
            if q.chunks == 0:
                q.t_first_audio = c.finished
            q.sent += q.pending_n  # type: ignore[attr-defined]
            q.chunks += 1
            if item.last:
                q.last_sent = True
                if self.slot_owner.get(item.slot) == rid:
                    self.slot_owner.pop(item.slot)

    def _dead(self, rid: int) -> None:
        q = self.reqs[rid]
        q.dead = True
        for p in q.pages:
            self.page_owner.pop(p, None)
        if self.slot_owner.get(q.slot) == rid:
            self.slot_owner.pop(q.slot)
