"""The executor interface: where the scheduler's decisions run.

Three lanes, each an in-order queue with at most one batch in flight:

    "lm"          prefill and decode batches (backbone + depth transformer + sampling)
    "urgent"      codec batches of first chunks / near-deadline chunks (whole device, top priority)
    "background"  codec batches with slack (small SM partition beside the LM)

The engine's host loop calls `launch(work)` on a free lane and `wait(until)` for completions. What
a lane *is* differs per backend: a worker thread (`cpu`), a stream on a green-context partition with
per-(partition, stage, bucket) CUDA graphs (`cuda`), or a discrete-event device with a virtual clock
(`sim`). The policy decides how lanes share the device (`layout`):

    sync    one loop, LM step then codec; nothing overlaps (time sharing)
    sync2   one loop, but the codec call runs on a second stream beside the LM step (interference)
    lanes   asynchronous lanes, no SM split (interference), no urgent lane
    full    asynchronous lanes on an SM split + whole-device urgent lane
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal

LaneName = Literal["lm", "urgent", "background"]
StageName = Literal["prefill", "decode", "codec"]
LANES: tuple[LaneName, ...] = ("lm", "urgent", "background")

_batch_ids = itertools.count(1)


@dataclass
class Work:
    """One batch for one lane. `rows` are engine Rows (prefill/decode) or CodecItems (codec);
    `bucket` is the padded batch size the backend's executable was built for; `tag` is the
    scheduler's bookkeeping (which chunks/requests this batch covers), opaque to the executor."""

    lane: LaneName
    stage: StageName
    rows: list[Any]
    bucket: int
    tag: Any = None
    tokens: int = 0  # prefill: prompt positions in the batch (cost estimates)
    frames: int = 0  # codec: total frames in the batch (cost estimates)
    batch_id: int = field(default_factory=lambda: next(_batch_ids))
    # The scheduler clock reading this batch was decided at. On a real clock `launch` comes a little
    # later; rules about the decision (is a chunk urgent, is a cancel known) hold at this time.
    decided_at: float | None = None


@dataclass
class Completion:
    work: Work
    started: float
    finished: float
    result: list[Any] | None = None  # StepOutputs (lm) or PCM arrays (codec), one per row
    error: BaseException | None = None
    # Extra stage calls fault isolation made to find the rows responsible for an error (engine/isolation.py);
    # > 0: the duration is not one batch's cost, so no estimate learns from it.
    reruns: int = 0


class Executor(ABC):
    """Backends implement this. All times are seconds on the executor's clock (`now`)."""

    @abstractmethod
    def now(self) -> float:
        """Current time: wall clock (cpu, cuda) or virtual (sim)."""

    @abstractmethod
    def busy(self, lane: LaneName) -> bool:
        """True while the lane has a batch in flight."""

    @abstractmethod
    def launch(self, work: Work) -> None:
        """Start `work` on its lane (the lane must be free). Returns at once."""

    @abstractmethod
    def wait(self, until: float | None) -> list[Completion]:
        """Block until at least one completion or until time `until` (None = until a completion;
        returns [] immediately if nothing is in flight and until is None). The sim advances its
        virtual clock instead of sleeping."""

    def close(self) -> None:  # noqa: B027 - optional
        """Stop workers, release device resources."""
