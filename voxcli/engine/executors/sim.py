"""The sim executor: a discrete-event device with a virtual clock.

Each launched Work runs the model program's stage at once (a SyntheticProgram costs nothing) and
occupies its lane for a duration from the CostProfile: `latency(stage, bucket, lane SMs, tokens,
frames)`. Lanes run concurrently:
  - lanes on disjoint SM partitions (full: lm and background) run at their partition's speed;
  - lanes that share SMs (no partition: `lanes`, `sync2`) are each slowed by `profile.interference`
    while they overlap; the urgent lane (whole device, highest stream priority) keeps its speed and
    slows whatever it overlaps by the same factor;
  - `sync` serializes: launching on a second lane while one is busy is a scheduler bug and raises.
Progress is tracked as remaining solo-seconds per lane and re-rated whenever the set of running lanes
changes, so a batch that overlaps another only for part of its life is slowed only for that part."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from voxcli.engine.cost import CostProfile
from voxcli.engine.executors.base import Completion, Executor, LaneName, Work
from voxcli.engine.executors.stages import run_work
from voxcli.engine.lanes import LaneLayout
from voxcli.models.base import ModelProgram

_EPS = 1e-9  # one virtual nanosecond: float residue of re-rated progress


@dataclass
class _Running:
    work: Work
    started: float
    remaining: float  # solo seconds left
    result: list[Any] | None
    error: BaseException | None


class SimExecutor(Executor):
    realtime = False

    def __init__(self, program: ModelProgram, profile: CostProfile, layout: LaneLayout, start: float = 0.0):
        self.program = program
        self.profile = profile
        self.layout = layout
        self._t = start
        self._running: dict[str, _Running] = {}
        self.launches = 0

    def now(self) -> float:
        return self._t

    def busy(self, lane: LaneName) -> bool:
        return lane in self._running

    def duration(self, work: Work) -> float:
        """Solo duration of `work` on its lane (no interference)."""
        sms = self.layout.sms.get(work.lane)
        frames = work.frames
        if work.stage == "codec" and work.rows and work.bucket > len(work.rows):
            frames = round(frames * work.bucket / len(work.rows))  # padded rows cost like real ones
        return self.profile.latency(work.stage, work.bucket, sms, work.tokens, frames)

    def launch(self, work: Work) -> None:
        if work.lane in self._running:
            raise RuntimeError(f"lane {work.lane} already has a batch in flight")
        if self.layout.serialized and self._running:
            raise RuntimeError(f"policy sync serializes lanes, but {work.lane} was launched while "
                               f"{next(iter(self._running))} is busy")
        result: list[Any] | None = None
        error: BaseException | None = None
        try:
            result = run_work(self.program, work)
        except Exception as e:  # the stage's failure belongs to its requests, not to the device
            error = e
        self._running[work.lane] = _Running(work, self._t, self.duration(work), result, error)
        self.launches += 1

    def _slowdown(self, lane: str) -> float:
        if len(self._running) < 2 or lane == self.layout.priority_lane:
            return 1.0
        for other in self._running:
            if other != lane and self.layout.overlaps(lane, other):
                return self.profile.interference
        return 1.0

    def wait(self, until: float | None) -> list[Completion]:
        if not self._running:
            if until is not None and until > self._t:
                self._t = until
            return []
        slow = {lane: self._slowdown(lane) for lane in self._running}
        t_next = min(self._t + run.remaining * slow[lane] for lane, run in self._running.items())
        if until is not None and until < t_next:
            t_next = max(until, self._t)
        dt = t_next - self._t
        done: list[Completion] = []
        for lane in sorted(self._running):  # stable order: same inputs, same completion order
            run = self._running[lane]
            run.remaining -= dt / slow[lane]
            if run.remaining <= _EPS:
                done.append(Completion(run.work, run.started, t_next, run.result, run.error))
        self._t = t_next
        for c in done:
            del self._running[c.work.lane]
        return done
