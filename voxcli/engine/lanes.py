"""The lane plan: which lanes a policy uses, where each runs, what it runs and in which batch sizes.

One object, read by everyone: the scheduler (which lanes it may fill, the bucket of a batch), the
latency estimator and the sim executor (SMs per lane, overlap, priority), the cpu executor (a thread
per lane) and the cuda executor (a stream, a graph-table partition and graphs per lane). Nothing else
decides these things, so the executor captures exactly the graphs the scheduler can ask for, in the
buckets it will ask for.

Per policy (lane_policies.py declares which shape each has):

    full    lm on the backbone SM partition, background codec on the codec partition, urgent codec
            on the whole device at the greatest stream priority (it keeps its speed and slows others)
    lanes   lm and background on two whole-device streams (no partition, no urgent lane)
    sync2   as lanes; the scheduler keeps the codec beside the LM step
    sync    both lanes on ONE stream: never two at once (time sharing)

Per role (config.role, a disaggregated placement: voxcli/engine/roles.py), the policy's plan keeps only
the role's lanes, each on the whole device (the GPU does nothing else):

    lm      the lm lane alone; each complete chunk's codes leave the engine
    codec   the policy's codec lanes (full: urgent at the greatest priority + background; lanes:
            background), fed chunks from an LM engine elsewhere

Stream priorities belong to the streams (`partitions.lane_priorities`): "device" greatest, "lm" one
below, "codec" least. Prefill is not tabled: it runs eagerly (variable length) on the whole device at
the lm stream's priority.
"""

from __future__ import annotations

from dataclasses import dataclass

from voxcli.config import EngineConfig
from voxcli.engine.executors.base import LaneName, StageName
from voxcli.engine.lane_policies import lane_policy_type

StreamRole = str  # "lm" | "codec" | "device": which LaneStreams stream a lane uses


class BucketError(ValueError):
    """A batch size no bucket of its lane/stage holds."""


@dataclass(frozen=True)
class LaneLayout:
    policy: str
    lanes: tuple[LaneName, ...]
    sms: dict[str, int | None]  # SMs per lane; None = the whole device (no partition)
    serialized: bool  # sync: never two lanes at once (time sharing)
    # a lane that, when running beside others, keeps its speed and slows them (stream priority)
    priority_lane: LaneName | None = None
    stream: dict[str, StreamRole] | None = None  # lane -> LaneStreams stream
    # lane -> graph-table partition name. A graph keeps the SM partition of the stream it was captured
    # on, so graphs are keyed by partition; lanes that share a stream still get their own name (own
    # graphs, own memory pool: lanes on one stream would otherwise share static outputs not yet read).
    partition: dict[str, str] | None = None
    # lane -> the stages it runs with fixed batch buckets (graphs), each with its buckets, ascending
    stages: dict[str, tuple[tuple[StageName, tuple[int, ...]], ...]] | None = None

    def overlaps(self, a: str, b: str) -> bool:
        """True if lanes a and b compete for the same SMs when they run at once."""
        if a == b:
            return True
        return self.sms[a] is None or self.sms[b] is None

    @property
    def partitioned(self) -> bool:
        return any(v is not None for v in self.sms.values())

    def buckets(self, lane: str, stage: str) -> tuple[int, ...]:
        for s, b in (self.stages or {}).get(lane, ()):
            if s == stage:
                return b
        raise BucketError(f"lane {lane!r} runs no {stage!r} batches under policy {self.policy!r}")

    def bucket_for(self, lane: str, stage: str, n: int) -> int:
        """The smallest bucket of `lane`/`stage` that holds `n` rows: the one rule for every user."""
        buckets = self.buckets(lane, stage)
        if n < 1:
            raise BucketError(f"a batch needs at least one row, got {n}")
        for b in buckets:
            if b >= n:
                return b
        raise BucketError(f"a batch of {n} rows exceeds the largest {lane} {stage} bucket {buckets[-1]}; "
                          "raise the bucket list in the recipe or cap batches at it")

    def largest(self, lane: str, stage: str) -> int:
        return self.buckets(lane, stage)[-1]


ROLE_LANES: dict[str, tuple[LaneName, ...]] = {"lm": ("lm",), "codec": ("urgent", "background")}


def lane_layout(config: EngineConfig) -> LaneLayout:
    layout = _policy_layout(config)
    role = getattr(config, "role", "both")
    return layout if role == "both" else role_layout(layout, role)


def role_layout(layout: LaneLayout, role: str) -> LaneLayout:
    """The policy's plan restricted to a role's lanes, every lane on the whole device (no partition)."""
    keep = tuple(lane for lane in layout.lanes if lane in ROLE_LANES[role])

    def only(table: dict | None) -> dict | None:
        return None if table is None else {lane: v for lane, v in table.items() if lane in keep}

    return LaneLayout(layout.policy, keep, {lane: None for lane in keep}, serialized=False,
                      priority_lane=layout.priority_lane if layout.priority_lane in keep else None,
                      stream=only(layout.stream), partition=only(layout.partition),
                      stages=only(layout.stages))


def _policy_layout(config: EngineConfig) -> LaneLayout:
    """The plan of the lanes the policy declares (lane_policies.py): an urgent lane on the whole device
    beside partitioned LM and background lanes, or LM and background on whole-device streams (one
    stream when the policy serializes them)."""
    policy = config.policy
    kind = lane_policy_type(policy)
    decode = (("decode", tuple(sorted(config.decode_buckets))),)
    background = (("codec", tuple(sorted(config.background_buckets))),)
    if kind.has_urgent_lane:
        return LaneLayout(policy, ("lm", "urgent", "background"),
                          {"lm": config.lm_sms, "background": config.codec_sms, "urgent": None},
                          serialized=False, priority_lane="urgent",
                          stream={"lm": "lm", "background": "codec", "urgent": "device"},
                          partition={"lm": "backbone", "background": "codec", "urgent": "device"},
                          stages={"lm": decode, "background": background,
                                  "urgent": (("codec", tuple(sorted(config.urgent_buckets))),)})
    sms: dict[str, int | None] = {"lm": None, "background": None}
    codec_stream = "lm" if kind.serialized else "codec"
    return LaneLayout(policy, ("lm", "background"), sms, serialized=kind.serialized,
                      stream={"lm": "lm", "background": codec_stream},
                      partition={"lm": "whole/lm", "background": "whole/background"},
                      stages={"lm": decode, "background": background})
