"""Lane policies: which batch each free lane runs next. The mechanism builds the batches (the LM batcher,
lm_batcher.py, and the codec batcher, codec_batcher.py, which engine/scheduler.py hands each policy as
`(lm, codec)`); a policy only picks which to ask for, and when.

Picked by name from `LANE_POLICIES` (config `policy`; config.py validates the name against it). See
`lanes.py` for how each policy's lanes share the device.

  full: urgent lane = first chunks and chunks within `urgent_margin_s` of their deadline, deadline
    order, up to the largest urgent bucket, whenever the lane is free. Background lane = the other
    ready chunks, in deadline order up to the largest background bucket, launched when at least B are
    ready, or when the earliest deadline minus the batch's estimated latency comes within the urgent
    margin (the last moment the batch can finish before its first chunk would turn urgent), or when the
    LM lane has no request left to generate for. With `slack_cap` a launched batch is cut to the head of
    the deadline order that ends before its first chunk turns urgent, and a chunk no background batch can
    end in time is left to the urgent lane (engine/codec_batcher.py).
  lanes: one asynchronous codec lane ("background", no partition, no urgent lane) with the same slack
    batching, except that an urgent chunk (first, or near its deadline) launches the batch at once.
  sync2: one host loop; each iteration launches an LM step and a codec batch of every ready chunk
    together and waits for both.
  sync: one host loop; an LM step, then a codec batch of every ready chunk, one after the other.

A new policy is a subclass here and a registry entry; the mechanism never asks for a policy's name.
"""

from __future__ import annotations

from typing import ClassVar, Protocol

from voxcli.engine.executors.base import LaneName, Work


class LmLane(Protocol):
    """What a lane policy asks of the LM side: the next LM batch (None: nothing to run)."""

    def lm_work(self, now: float) -> Work | None: ...


class CodecLanes(Protocol):
    """What a lane policy asks of the codec side: each call builds one batch (None: nothing to run)."""

    def urgent_batch(self, now: float) -> Work | None: ...
    def background_batch(self, now: float, urgent_lane: bool) -> Work | None: ...
    def codec_all(self, now: float) -> Work | None: ...


class NoLane:
    """The side of an engine that runs no such lane (a role engine): it never has a batch. A policy
    asks only for the lanes that are free, so a role's missing lanes are never asked; this answers
    anyway, never with work."""

    def lm_work(self, now: float) -> Work | None:
        return None

    def urgent_batch(self, now: float) -> Work | None:
        return None

    def background_batch(self, now: float, urgent_lane: bool) -> Work | None:
        return None

    def codec_all(self, now: float) -> Work | None:
        return None


def launch(works: list[Work], work: Work | None) -> None:
    """Take a batch the policy asked for (None: there was nothing to run)."""
    if work is not None:
        works.append(work)


class LanePolicy:
    """One policy's decisions. Class attributes say what the mechanism must know without asking names:

    first_lane        where a first chunk (or any lone chunk) decodes: the TTFA codec lane
    has_urgent_lane   an urgent lane takes chunks near their deadline (so slack_cap can leave them to it)
    deadline_batches  continuation chunks wait for company in deadline-ordered background batches (the
                      batch timers and the gate's codec-backlog check apply)
    separate_lanes    the LM and the codec run asynchronously (a disaggregated role needs this)
    serialized        the lanes time-share one stream, never two at once (lanes.py's plan)
    """

    name: ClassVar[str]
    first_lane: ClassVar[LaneName] = "background"
    has_urgent_lane: ClassVar[bool] = False
    deadline_batches: ClassVar[bool] = False
    separate_lanes: ClassVar[bool] = False
    serialized: ClassVar[bool] = False

    def decide(self, lm: LmLane, codec: CodecLanes, free: set[str], lane_count: int, now: float,
               works: list[Work]) -> None:
        """Append to `works` (through `launch`) what the free lanes run next, in the order asked."""
        raise NotImplementedError


class Full(LanePolicy):
    name = "full"
    first_lane = "urgent"
    has_urgent_lane = True
    deadline_batches = True
    separate_lanes = True

    def decide(self, lm: LmLane, codec: CodecLanes, free: set[str], lane_count: int, now: float,
               works: list[Work]) -> None:
        if "urgent" in free:
            launch(works, codec.urgent_batch(now))
        if "lm" in free:
            launch(works, lm.lm_work(now))
        if "background" in free:
            launch(works, codec.background_batch(now, urgent_lane=True))


class Lanes(LanePolicy):
    name = "lanes"
    deadline_batches = True
    separate_lanes = True

    def decide(self, lm: LmLane, codec: CodecLanes, free: set[str], lane_count: int, now: float,
               works: list[Work]) -> None:
        if "lm" in free:
            launch(works, lm.lm_work(now))
        if "background" in free:
            launch(works, codec.background_batch(now, urgent_lane=False))


class Sync2(LanePolicy):
    name = "sync2"

    def decide(self, lm: LmLane, codec: CodecLanes, free: set[str], lane_count: int, now: float,
               works: list[Work]) -> None:
        if len(free) == lane_count:  # wait for both halves of the iteration
            launch(works, lm.lm_work(now))
            launch(works, codec.codec_all(now))


class Sync(LanePolicy):
    name = "sync"
    serialized = True

    def __init__(self) -> None:
        self.codec_turn = False  # the LM step of this iteration ran: the codec batch is next

    def decide(self, lm: LmLane, codec: CodecLanes, free: set[str], lane_count: int, now: float,
               works: list[Work]) -> None:
        if len(free) != lane_count:  # LM step, then codec batch, never both
            return
        if self.codec_turn:
            self.codec_turn = False
            launch(works, codec.codec_all(now))
        if not works:
            launch(works, lm.lm_work(now))
            if works:
                self.codec_turn = True
            else:
                launch(works, codec.codec_all(now))


LANE_POLICIES: dict[str, type[LanePolicy]] = {p.name: p for p in (Sync, Sync2, Lanes, Full)}


def lane_policy_type(name: str) -> type[LanePolicy]:
    try:
        return LANE_POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; one of {', '.join(LANE_POLICIES)}") from None


def lane_policy(name: str) -> LanePolicy:
    """A fresh policy object (a policy may keep state across decisions: sync's turn)."""
    return lane_policy_type(name)()
