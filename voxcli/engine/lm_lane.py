"""The LM lane: what the next LM batch is, a prefill from the head of the queue or a decode step.

A prefill batch takes the queue's head in order (no overtaking: a big request is not starved by small
ones) while pages, a codec slot (role lm holds none), codec state and a running row are free for each
request, up to max_prefill_batch rows and max_prefill_tokens. A deadline-aware admission policy
(admission_policies.py) defers it while the smallest running slack is below its estimated duration,
never `max_defer_s` or more in a row. Otherwise one decode step: every running row when they fit the
largest decode bucket, else the bucket filled least slack first (deadline-aware) or in admission order.

Rows: a request whose prompt has `width` w (a CFG pair: 2 sequences in every forward pass) is one
Request but w rows: it counts w toward `max_running`, `max_prefill_batch`, the largest decode bucket and
the bucket of every LM batch holding it, and is never split across batches (its rows are one `Row`, so
they are admitted, batched, cancelled and freed together). Prefill tokens count `length * width`.
"""

from __future__ import annotations

from collections.abc import Iterable
from operator import attrgetter

from voxcli.engine import text_pacing
from voxcli.engine.chunk_flow import ChunkFlow
from voxcli.engine.executors.base import Work
from voxcli.engine.request import Request
from voxcli.engine.scheduler_state import S, rows_of
from voxcli.models.base import Row


class LmLane(ChunkFlow):
    def lm_work(self, now: float) -> Work | None:
        cands = self._prefill_candidates() if self.waiting else []
        if cands:
            admit = True
            if self.deadline_admission and self.decoding:
                est = self.est.prefill(sum(r.prompt.length * r.prompt.width for r in cands), rows_of(cands))
                ks, kc = self._key_step, self._key_codec1
                min_slack = min([r.slack_key(ks, kc) for r in self.decoding.values()]) - now
                if min_slack < est and self.admission.may_defer(self, cands[0], est, now):
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
        n = rows_of(cands)
        self.prefilling += n
        return Work(lane="lm", stage="prefill", rows=rows, bucket=n, tag=cands,
                    tokens=sum(r.prompt.length * r.prompt.width for r in cands))

    def _launch_decode(self, now: float) -> Work | None:
        # rows whose text is still arriving sit out while far ahead of playback (text_pacing.py)
        paced = text_pacing.paced(self, now) if self.fed else None
        if not paced and self.decoding_rows <= self.max_decode:
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
        return r.slack_key(self._key_step, self._key_codec1)


_row_of = attrgetter("row")
