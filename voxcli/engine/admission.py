"""TTFA-gated admission (`admission = "ttfa-gate"`): refuse at submit what cannot meet the SLO.

Past capacity a queue that takes everything serves nobody well: every request waits, so every TTFA is
lost (the paper's admission policies both collapse there). The gate predicts, from the latency
estimator and the scheduler's state at the moment a request arrives, the request's time to first audio:

    TTFA = LM wait + prefill + first-chunk frames x decode step + codec wait + first-chunk codec

  LM wait +     the batch now on the LM lane (one decode step), then the requests queued ahead and this
  prefill       one prefilled together, in batches of max_prefill_batch rows / max_prefill_tokens (the
                LM lane takes the queue's head whole), a decode step between two batches (deadline-aware
                admission interleaves them); or, when no decode row (or KV pages) would be free for
                it, the time until enough running requests finish (their frames left x the decode
                step) and then its own prefill;
  decode step   at the number of rows that will be running then (the ones running and queued + it);
  codec wait    the first chunks already waiting for the urgent lane, in batches of its largest bucket.

It refuses a request whose predicted TTFA exceeds the target, and also while the codec is behind:
when the continuation chunks already waiting need longer to decode (background batches of the largest
bucket, one after another) than the earliest of them has slack, a new request would only add stalls.
The queue is thereby bounded by predicted wait, not by count (`max_queue` stays as a backstop).
A refusal says which bound missed and by how much; `retry_after` is the excess (seconds after which
the same prediction, with the backlog served at the estimated rate, would fit).

The gate only decides admission; the LM lane then runs exactly as deadline-aware admission does
(engine/admission_policies.py: the policy object that puts the gate in front of the scheduler). It reads
the scheduler through `SchedulerView`, its public state: queues, pools, the pending chunks
(engine/pending.py) and the lane policy's first-chunk lane, never the scheduler's private fields.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from voxcli.engine.codec_slots import CodecSlotTable
from voxcli.engine.kv_cache import KVPagePool
from voxcli.engine.lane_policies import LanePolicy
from voxcli.engine.pending import PendingChunks
from voxcli.engine.request import Request
from voxcli.models.base import ChunkSchedule


class GateSettings(Protocol):
    """The engine settings the gate reads (config.EngineConfig has them)."""

    max_running: int
    decode_buckets: tuple[int, ...]
    max_prefill_batch: int
    max_prefill_tokens: int
    urgency_chunking: bool
    chunk: ChunkSchedule | None


class Estimates(Protocol):
    """Batch durations (engine/estimates.py's LatencyEstimator)."""

    def decode_step(self, rows: int) -> float: ...
    def prefill(self, tokens: int, rows: int = 1) -> float: ...
    def codec(self, lane: str, chunks: int, frames: int | None = None) -> float: ...


class SchedulerView(Protocol):
    """The scheduler's public state an admission policy reads (engine/scheduler.py keeps it current:
    plain attributes, or read-only properties over its parts)."""

    config: GateSettings
    est: Estimates
    kv: KVPagePool
    slots: CodecSlotTable
    margin: float  # urgent_margin_s
    lane_policy: LanePolicy
    first_batch_max: int  # the largest batch of first chunks on the lane policy's first-chunk lane

    @property
    def requests(self) -> Mapping[int, Request]: ...  # every non-terminal request
    @property
    def waiting(self) -> deque[Request]: ...  # the queue, head first
    @property
    def decoding(self) -> Mapping[int, Request]: ...  # running rows, admission order
    @property
    def decoding_rows(self) -> int: ...
    @property
    def prefilling(self) -> int: ...
    @property
    def handoff(self) -> bool: ...  # role lm: no codec slots held here
    @property
    def chunks(self) -> PendingChunks: ...
    @property
    def max_background(self) -> int: ...


@dataclass(frozen=True)
class Verdict:
    admit: bool
    predicted_ttfa: float
    reason: str = ""
    retry_after: float | None = None
    first_chunk: int | None = None  # urgency chunking: the first-chunk size chosen for this request


def resource_wait(sched: SchedulerView, r: Request, now: float, step: float) -> tuple[float, str]:
    """Seconds until a decode row, KV pages and a codec slot are free for `r` after the queue ahead of
    it took theirs (inf when they never are). Rows and pages come back when a running request's LM
    finishes (its frames left x the decode step); a codec slot when its last chunk is decoded, which
    the background lane does close to that chunk's playback deadline (the end of its audio, less the
    urgent margin). A request's length is its fixed length when it has one (the bench, the sim), else
    its frame cap (pessimistic for a model that stops early). Returns (seconds, which resource binds)."""
    cfg, queued = sched.config, list(sched.waiting)
    running = list(sched.decoding.values())
    wait, what = 0.0, ""
    rows_short = sched.decoding_rows + sched.prefilling + sum(q.prompt.width for q in queued) \
        + r.prompt.width - cfg.max_running
    pages_short = sum(q.need_pages for q in queued) + r.need_pages - sched.kv.free
    if rows_short > 0 or pages_short > 0:
        by_finish = sorted(running, key=lambda q: _frames(q) - q.n_frames)
        k, freed = max(rows_short, 0), 0
        if pages_short > 0:  # count finishing requests until their pages cover the shortfall
            j = 0
            while j < len(by_finish) and freed < pages_short:
                freed += len(by_finish[j].pages)
                j += 1
            k = max(k, j if freed >= pages_short else len(by_finish) + 1)
        what = "decode rows / KV pages"
        if k > len(by_finish):
            # more than every running request frees: the queue ahead runs in waves after them, each
            # as long as its average request
            if not queued:
                return math.inf, what  # nothing will ever free enough (the request alone is too big)
            last = (_frames(by_finish[-1]) - by_finish[-1].n_frames) * step if by_finish else 0.0
            per_wave = max(1, cfg.max_running // max(1, max(q.prompt.width for q in queued)))
            mean = sum(_frames(q) for q in queued) / len(queued) * step
            wait = last + math.ceil((k - len(by_finish)) / per_wave) * mean
        elif k > 0:
            wait = (_frames(by_finish[k - 1]) - by_finish[k - 1].n_frames) * step
    slots_short = 0 if sched.handoff else len(queued) + 1 - sched.slots.free  # role lm holds no slot
    if slots_short > 0:
        holders = [q for q in sched.requests.values() if q.slot >= 0]
        if not holders:
            return math.inf, "codec slots"
        steady, margin = sched.config.chunk.steady, sched.margin
        # more short than there are holders: at least until the last one frees (a lower bound)
        ends = heapq.nsmallest(min(slots_short, len(holders)),
                               (q.deadline_of(max(0, _frames(q) - steady)) - margin for q in holders))
        if ends[-1] - now > wait:
            wait, what = ends[-1] - now, "codec slots"
    return max(wait, 0.0), what


class TtfaGate:
    """The gate's state: per stage, how much slower the device has been than the estimator says
    (measured / estimated, an exponential average over completed batches). Contention, noise and host
    time on the device (or in the honest sim) make the table optimistic; predictions are scaled by
    these ratios, never below 1, so the gate refuses what the *observed* device would serve too late."""

    WEIGHT = 0.05  # exponential-average weight of one completed batch
    WINDOW_S = 2.0  # admitted requests whose first audio came this recently set the safety factor ...
    MIN_SAMPLES = 16  # ... once there are this many (else 1: an idle or new engine has no history)
    QUANTILE = 0.95  # ... at this quantile: the gate aims at 95% of the admitted meeting the target

    def __init__(self) -> None:
        self.ratio = {"decode": 1.0, "prefill": 1.0, "codec": 1.0}
        self.predicted: dict[int, float] = {}  # request id -> its predicted TTFA (admitted, no audio yet)
        self.errors: deque[tuple[float, float]] = deque()  # (time, measured / predicted TTFA)
        self.safety = 1.0

    def first_audio(self, r: Request, now: float) -> None:
        """An admitted request got its first audio: how far off was its prediction?"""
        pred = self.predicted.pop(r.id, None)
        if pred is not None and pred > 0:
            self.errors.append((now, (now - r.arrival) / pred))
        self._refresh(now)

    def _refresh(self, now: float) -> None:
        errors = self.errors
        while errors and errors[0][0] < now - self.WINDOW_S:
            errors.popleft()
        if len(errors) < self.MIN_SAMPLES:
            self.safety = 1.0
            return
        xs = sorted(e for _, e in errors)
        self.safety = max(1.0, xs[min(len(xs) - 1, int(self.QUANTILE * len(xs)))])

    def forget(self, r: Request) -> None:
        self.predicted.pop(r.id, None)

    def observe(self, sched: SchedulerView, stage: str, lane: str, bucket: int, tokens: int, frames: int,
                seconds: float) -> None:
        est = sched.est
        if stage == "decode":
            base = est.decode_step(bucket)
        elif stage == "prefill":
            base = est.prefill(tokens, bucket)
        else:
            base = est.codec(lane, bucket, frames)
        if base > 0 and seconds > 0:
            w = self.WEIGHT
            self.ratio[stage] = (1 - w) * self.ratio[stage] + w * (seconds / base)

    def scale(self, stage: str) -> float:
        return max(1.0, self.ratio[stage])

    def predict(self, sched: SchedulerView, r: Request, now: float) -> Verdict:
        cfg, est = sched.config, sched.est
        k_dec, k_pre, k_codec = self.scale("decode"), self.scale("prefill"), self.scale("codec")
        queued = len(sched.waiting)
        running = sched.decoding_rows + sched.prefilling  # rows: a CFG pair counts its width
        rows_then = min(cfg.max_running, running + sum(q.prompt.width for q in sched.waiting)
                        + r.prompt.width)
        buckets = cfg.decode_buckets  # a step costs its padded batch
        step = est.decode_step(_bucket(rows_then, buckets)) * k_dec
        step_now = est.decode_step(_bucket(sched.decoding_rows, buckets)) * k_dec

        # LM: the batch in flight, then the queue ahead and this request prefilled together (the LM
        # lane takes the queue's head up to max_prefill_batch rows / max_prefill_tokens per prefill), each
        # prefill batch but the last followed by a decode step; or, when the queue ahead takes the free
        # decode rows, KV pages or codec slots, the wait for them and this request's own prefill.
        # (Charging every queued request a prefill batch and a decode step of its own, then this
        # request's prefill apart, over-predicted by one step: the 99% loss of issue 17.)
        own_tokens = r.prompt.length * r.prompt.width
        rows_q = sum(q.prompt.width for q in sched.waiting) + r.prompt.width
        tokens_q = sum(q.prompt.length * q.prompt.width for q in sched.waiting) + own_tokens
        batches = max(math.ceil(rows_q / cfg.max_prefill_batch), math.ceil(tokens_q / cfg.max_prefill_tokens))
        lm_wait = step_now if sched.decoding or sched.prefilling else 0.0
        lm_wait += (batches - 1) * step_now
        joint = batches * est.prefill(math.ceil(tokens_q / batches), math.ceil(rows_q / batches)) * k_pre
        res_wait, res_what = resource_wait(sched, r, now, step_now)
        own_prefill = est.prefill(own_tokens, r.prompt.width) * k_pre
        lm_wait = max(lm_wait + joint, res_wait + own_prefill)

        codec_lane, max_first = sched.lane_policy.first_lane, sched.first_batch_max
        firsts = sched.chunks.first_count
        codec_wait = math.ceil(firsts / max_first) * est.codec(codec_lane, max_first) if firsts else 0.0
        base = lm_wait + codec_wait * k_codec
        target = r.ttfa_target
        if self.errors and self.errors[0][0] < now - self.WINDOW_S:
            self._refresh(now)

        lead = r.prompt.lead_steps  # frameless steps first (a delay fill, a unified LM's text phase)
        per_frame = r.prompt.steps_per_frame  # steps a frame takes (Orpheus: 7 tokens a frame)

        def ttfa_with(first: int) -> float:  # raw prediction with a first chunk of `first` frames
            return base + (lead + first * per_frame) * step + est.codec(codec_lane, 1, first) * k_codec

        first = r.schedule.size(0)
        chosen = None
        if cfg.urgency_chunking:
            # the largest first chunk the slack allows (fewer, bigger codec calls), halving down to 1
            f = first
            while f > 1 and ttfa_with(f) * self.safety > target:
                f //= 2
            if f != first:
                chosen = first = f
        raw = ttfa_with(first)
        ttfa = raw * self.safety
        if ttfa > target:
            why = f"{queued} queued ahead, {running} running"
            if res_wait + own_prefill >= lm_wait and res_what:
                why += f", waiting {res_wait * 1e3:.0f} ms for free {res_what}"
            retry = None if math.isinf(ttfa) else ttfa - target
            shown = "unbounded" if math.isinf(ttfa) else f"{ttfa * 1e3:.0f} ms"
            return Verdict(False, ttfa, f"overloaded: predicted time to first audio {shown} exceeds the "
                                        f"{target * 1e3:.0f} ms target ({why}); retry later", retry)
        behind = codec_behind(sched, now) * k_codec
        if behind > 0:
            return Verdict(False, ttfa, f"overloaded: the codec is {behind * 1e3:.0f} ms behind its "
                                        f"playback deadlines; retry later", behind)
        self.predicted[r.id] = raw
        return Verdict(True, ttfa, first_chunk=chosen)

    def may_defer(self, sched: SchedulerView, head: Request, prefill_s: float, now: float) -> bool:
        """Deadline-aware deferral of the head prefill, bounded by the head's own TTFA: defer only while
        the head could still be prefilled after one more deferral window and meet its target."""
        rows = sched.decoding_rows + head.prompt.width
        step = sched.est.decode_step(_bucket(rows, sched.config.decode_buckets)) * self.scale("decode")
        first_steps = head.schedule.size(0) * head.prompt.steps_per_frame  # Orpheus: 7 steps a frame
        need = prefill_s * self.scale("prefill") + first_steps * step \
            + sched.est.codec(sched.lane_policy.first_lane, 1) * self.scale("codec")
        return now + prefill_s + need <= head.arrival + head.ttfa_target


def urgent_schedule(schedule: ChunkSchedule, first: int) -> ChunkSchedule:
    """A first chunk of `first` frames, then chunks doubling in size up to the steady size."""
    ramp, n = [], first * 2
    while n < schedule.steady:
        ramp.append(n)
        n *= 2
    return ChunkSchedule(first=first, ramp=tuple(ramp), steady=schedule.steady)


def _frames(r: Request) -> int:
    """Frames the request will have in all: its fixed length if known, else its cap."""
    fixed = r.prompt.fixed_frames
    return r.frame_cap if fixed is None else min(fixed, r.frame_cap)


def _bucket(n: int, buckets: tuple[int, ...]) -> int:
    return next((b for b in buckets if b >= n), max(n, 1))


def codec_behind(sched: SchedulerView, now: float) -> float:
    """How far (seconds) the waiting continuation chunks overrun their deadlines when decoded back to
    back in the largest background batches, in deadline order (0 = the codec keeps up)."""
    order = sched.chunks.order
    if not order or not sched.lane_policy.deadline_batches:
        return 0.0
    big = sched.max_background
    t_batch = sched.est.codec("background", big)
    worst = 0.0
    for k in range(0, len(order), big):  # batch k ends (k/big + 1) batches from now
        worst = max(worst, (k // big + 1) * t_batch - (order[k][0] - now))
    return worst
