"""The scheduler's state, shared by its parts: queues, pools, pending chunks, lanes, policies, counters.

The scheduler (engine/scheduler.py) is one object whose methods live in small files, one job each; each
part is a class over this one, and `Scheduler` joins them. They share the fields below rather than
passing them around because the decode hot path reads a dozen of them per step and an indirection per
field would cost more than the step's own work (`python -m benchmarks bench_scheduler` measures it). Only
this file creates fields; the parts read and update them.

Fields other modules may read: config, spec, est, layout, kv, slots, requests, waiting, decoding,
decoding_rows, prefilling, pending (dispatchable chunks by request id) and `chunks` (engine/pending.py,
the view admission policies read), busy, counts, defer_since, lane_policy, admission, gate.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

import numpy as np

from voxcli.config import EngineConfig
from voxcli.engine.admission_policies import admission_policy
from voxcli.engine.codec_slots import CodecSlotTable
from voxcli.engine.estimates import LatencyEstimator
from voxcli.engine.events import Event
from voxcli.engine.executors.base import Completion
from voxcli.engine.frame_log import FrameLog
from voxcli.engine.kv_cache import KVPagePool
from voxcli.engine.lane_policies import lane_policy
from voxcli.engine.lanes import LaneLayout, lane_layout
from voxcli.engine.pending import PendingChunks
from voxcli.engine.request import Request, RequestState
from voxcli.models.base import ModelSpec, Prompt, Row

S = RequestState


class SchedulerState:
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
        # the policies, by name from their registries (lane_policies.py, admission_policies.py)
        self.lane_policy = lane_policy(config.policy)
        self.admission = admission_policy(config.admission)
        self.deadline_admission = self.admission.deadline_aware
        self.gate = self.admission.gate  # the TTFA predictor when the admission policy has one
        self.margin = config.urgent_margin_s
        # Batch caps and buckets come from the lane plan (lanes.py), the same table the executors build
        # their graphs from.
        lanes = self.layout.lanes
        self.max_urgent = self.layout.largest("urgent", "codec") if "urgent" in lanes else 0
        self.max_background = self.layout.largest("background", "codec") if "background" in lanes else 0
        self.max_decode = self.layout.largest("lm", "decode") if "lm" in lanes else 0
        first_lane = self.lane_policy.first_lane  # where a lone chunk decodes
        self.first_batch_max = self.layout.largest(first_lane, "codec") if first_lane in lanes else 0
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
        self.fed: dict[int, Request] = {}  # requests whose text is fed as it arrives (text_pacing.py)
        # dispatchable chunks, at most one per request (pending.py); the hot paths use the aliases
        self.chunks = PendingChunks()
        self.pending = self.chunks.by_request
        self._firsts = self.chunks.firsts
        self._order = self.chunks.order
        self.busy: dict[str, bool] = {lane: False for lane in lanes}
        self.defer_since: float | None = None
        self._key_step = estimator.decode_step(1)
        self._key_lane = first_lane
        self._key_codec1 = estimator.codec(first_lane, 1)
        self._key_at: tuple[int, int] | None = None  # (rows, estimator version) of the two keys above
        self._ended_in_lm: set[int] = set()  # requests that ended while an LM batch held them
        self._decode_all = False  # a decode step of every running row is in flight
        # (requests, rows, bucket) of a step of every running row, kept until `decoding` changes: most
        # steps run the same rows as the one before, and the lists are read-only downstream
        self._decode_batch: tuple[list[Request], list[Row], int] | None = None
        # The hot path (decode_hot_path.py): a step of every running row goes into the frame log whole,
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
        # config slack_cap: background batches cut by their chunks' slack ("slack_cuts"); only with an
        # urgent lane to leave the chunks that no batch can end in time to
        self.slack_cap = config.slack_cap and self.lane_policy.has_urgent_lane
        self.counts = {"promoted": 0, "deadline_launches": 0, "slack_cuts": 0}
        self._bg_padded: dict[tuple[int, int], tuple[int, int]] = {}  # (chunks, frames) -> (bucket, frames)


def rows_of(reqs: Iterable[Request]) -> int:
    """Rows (sequences per forward pass) of a set of requests: a CFG pair counts 2."""
    return sum(r.prompt.width for r in reqs)


def describe(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def stage_reason(stage: str, c: Completion) -> str:
    """Why every request of a failed batch failed."""
    if c.error is not None:
        return f"the {stage} stage failed: {describe(c.error)}"
    return f"the {stage} stage returned {0 if c.result is None else len(c.result)} results for " \
           f"{len(c.work.rows)} rows"

