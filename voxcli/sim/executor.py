"""The sim executor: a discrete-event device with a virtual clock.

Each launched Work runs the model program's stage at once (a SyntheticProgram costs nothing) and
occupies its lane for a duration from the CostProfile: `latency(stage, bucket, lane SMs, tokens,
frames)`. Lanes run concurrently:
  - lanes on disjoint SM partitions (full: lm and background) run at their partition's speed;
  - lanes that share SMs (no partition: `lanes`, `sync2`) are each slowed by `profile.interference`
    while they overlap; the urgent lane (whole device, highest stream priority) keeps its speed and
    slows whatever it overlaps by the same factor;
  - `sync` serializes: launching on a second lane while one is busy is a scheduler bug and raises.
A decode batch of CFG pairs that share work (`Prompt.uncond_key`) costs the profile's `cfg_row` /
`cfg_group` rows per pair / per distinct key instead of 2 rows per pair (cost.py StageCost.cfg_row).
Progress is tracked as remaining solo-seconds per lane and re-rated whenever the set of running lanes
changes, so a batch that overlaps another only for part of its life is slowed only for that part.

The profile's sim model (`CostProfile.sim_model`, chosen by `config.sim_model`) adds, each on its own
flag (the "optimistic" model has none of them and is the description above, exactly):
  - urgent_contention: the urgent lane is slowed by `interference` too while it overlaps another lane
    (stream priority orders block launches; it does not preempt the partitions' resident blocks);
  - bandwidth_sharing: each running batch spends the fraction f = bytes / bandwidth / solo time of its
    life streaming memory; while it does, each other lane streams a fraction f_j of the time and they
    split the bandwidth, so a lane is slowed by 1 + f * sum(f_j) on top of the rest;
  - noise_sigma: each batch's solo time is the table's times lognormal(mean 1, sigma), seeded;
  - host: scheduler calls take host time (`charge_host`): the virtual clock moves on while the device
    keeps running, and completions that land meanwhile are only seen after it."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from voxcli.engine.executors.base import Completion, Executor, LaneName, Work
from voxcli.engine.executors.stages import run_work_isolated
from voxcli.engine.lanes import LaneLayout
from voxcli.models.base import ModelProgram
from voxcli.sim.cost import CostProfile, SimModel

_EPS = 1e-9  # one virtual nanosecond: float residue of re-rated progress


@dataclass
class _Running:
    work: Work
    started: float
    remaining: float  # solo seconds left
    result: list[Any] | None
    error: BaseException | None
    mem_frac: float = 0.0  # share of its solo time spent streaming memory (bandwidth model)


class SimExecutor(Executor):
    realtime = False

    def __init__(self, program: ModelProgram, profile: CostProfile, layout: LaneLayout, start: float = 0.0,
                 model: SimModel | None = None, seed: int = 0):
        self.program = program
        self.profile = profile
        self.layout = layout
        self.model = model or profile.sim_model()
        self._rng = np.random.default_rng(seed)
        self._t = start
        self._running: dict[str, _Running] = {}
        self._seen: list[Completion] = []  # finished while the host was busy, not yet handed back
        self.launches = 0

    def now(self) -> float:
        return self._t

    def busy(self, lane: LaneName) -> bool:
        return lane in self._running or any(c.work.lane == lane for c in self._seen)

    def duration(self, work: Work) -> float:
        """Solo duration of `work` on its lane (no interference)."""
        sms = self.layout.sms.get(work.lane)
        frames = work.frames
        if work.stage == "codec" and work.rows and work.bucket > len(work.rows):
            frames = round(frames * work.bucket / len(work.rows))  # padded rows cost like real ones
        bucket: float = work.bucket
        cost = self.profile.stages.get(work.stage)
        if work.stage == "decode" and cost is not None and (cost.cfg_row != 1.0 or cost.cfg_group):
            keys = [r.prompt.uncond_key for r in work.rows
                    if r.prompt.width == 2 and r.prompt.uncond_key is not None]
            bucket -= cost.cfg_rows(len(keys), len(set(keys)))
        return self.profile.latency(work.stage, bucket, sms, work.tokens, frames)

    def launch(self, work: Work) -> None:
        if work.lane in self._running:
            raise RuntimeError(f"lane {work.lane} already has a batch in flight")
        if self.layout.serialized and self._running:
            raise RuntimeError(f"policy sync serializes lanes, but {work.lane} was launched while "
                               f"{next(iter(self._running))} is busy")
        result: list[Any] | None = None
        error: BaseException | None = None
        try:  # a row whose data makes the stage raise fails alone (engine/isolation.py)
            result = run_work_isolated(self.program, work).results
        except Exception as e:  # the stage's failure belongs to its requests, not to the device
            error = e
        solo = self.duration(work)
        m = self.model
        if m.noise_sigma > 0:  # mean-1 lognormal: the table stays right on average
            solo *= math.exp(self._rng.normal(-0.5 * m.noise_sigma ** 2, m.noise_sigma))
        mem = 0.0
        if m.bandwidth_sharing and solo > 0:
            moved = self.profile.bytes_moved(work.stage, work.bucket, work.frames)
            mem = min(1.0, moved / (m.bandwidth_gbs * 1e9) / solo)
        self._running[work.lane] = _Running(work, self._t, solo, result, error, mem)
        self.launches += 1

    def next_completion_at(self) -> float | None:
        """The sim time at which the first running batch ends if nothing else launches (None: none runs):
        what a real-time wrapper (realtime_executor.py) sleeps until."""
        if not self._running:
            return None
        return min(self._t + run.remaining * self._slowdown(lane) for lane, run in self._running.items())

    def _slowdown(self, lane: str) -> float:
        if len(self._running) < 2:
            return 1.0
        slow = 1.0
        if lane != self.layout.priority_lane or self.model.urgent_contention:
            for other in self._running:
                if other != lane and self.layout.overlaps(lane, other):
                    slow = self.profile.interference
                    break
        if self.model.bandwidth_sharing:
            others = sum(r.mem_frac for other, r in self._running.items() if other != lane)
            slow *= 1.0 + self._running[lane].mem_frac * others
        return slow

    def charge_host(self, measured_s: float, rows: int = 0) -> float:
        """The host spent time on a scheduler call (`measured_s` of thread CPU time, over `rows` rows):
        advance the clock by what the sim model charges for it; the device keeps running meanwhile.
        Returns the seconds charged."""
        m = self.model
        if m.host == "free":
            return 0.0
        dt = measured_s if m.host == "measured" else (m.host_call_us + m.host_row_us * rows) * 1e-6
        if dt <= 0:
            return 0.0
        end = self._t + dt
        while self._running and self._t < end:
            self._seen += self._advance(end)
        self._t = max(self._t, end)
        return dt

    def wait(self, until: float | None) -> list[Completion]:
        if self._seen:  # the host notices these only now: the lane stayed idle until this moment
            seen, self._seen = self._seen, []
            return [replace(c, finished=max(c.finished, self._t)) for c in seen]
        if not self._running:
            if until is not None and until > self._t:
                self._t = until
            return []
        return self._advance(until)

    def _advance(self, until: float | None) -> list[Completion]:
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
