"""The real-time sim executor: the sim's simulated GPU, advancing with the wall clock.

`SimExecutor` runs each stage at once (a SyntheticProgram costs nothing) and says how long it would
have occupied its lane on the profiled GPU; on its own it jumps its virtual clock from event to event.
Here the same device is put on the wall clock: a batch launched at wall time t completes at wall time
t + (its simulated duration, with the same interference rules), and `wait` sleeps until then. The engine
then runs on its real-clock host thread exactly as over the cpu or cuda executor, so a server, its
clients and a scale-out can be load-tested at H100 rates on a CPU machine.

Assumptions (each visible in the numbers this produces):
  - the host work (scheduler, server, network) is real and costs what it costs on this machine; only
    the device is simulated. A slow host therefore shows up as lost device time, as it would on a GPU.
  - the device's timing is the sim's (`recipes/gpus/<gpu>.toml`), so everything the sim assumes holds.
  - a completion that the host notices late is handed back with its simulated finish time, so
    timelines stay on the device's clock; clients time what they receive themselves.
"""

from __future__ import annotations

import threading

from voxcli.engine.clock import WallClock
from voxcli.engine.executors.base import Completion, Executor, LaneName, Work
from voxcli.engine.lanes import LaneLayout
from voxcli.models.base import ModelProgram
from voxcli.sim.cost import CostProfile
from voxcli.sim.executor import SimExecutor


class RealtimeSimExecutor(Executor):
    realtime = True

    def __init__(self, program: ModelProgram, profile: CostProfile, layout: LaneLayout,
                 clock: WallClock | None = None) -> None:
        self.clock = clock or WallClock()
        self.device = SimExecutor(program, profile, layout, start=self.clock.now())
        self.layout = layout
        self._done: list[Completion] = []  # completed on the device, not yet handed to the engine
        self._wake = threading.Event()

    def now(self) -> float:
        return self.clock.now()

    def busy(self, lane: LaneName) -> bool:
        return self.device.busy(lane) or any(c.work.lane == lane for c in self._done)

    def _catch_up(self, now: float) -> None:
        """Advance the device to wall time `now`, collecting every completion on the way."""
        while self.device.now() < now:
            done = self.device.wait(until=now)
            self._done.extend(done)
            if not done and self.device.now() < now:  # nothing in flight: wait() parked before `now`
                break

    def launch(self, work: Work) -> None:
        self._catch_up(self.now())
        self.device.launch(work)

    def interrupt(self) -> None:
        """Wake a sleeping `wait` (a new request or a cancel arrived on another thread)."""
        self._wake.set()

    def wait(self, until: float | None) -> list[Completion]:
        while True:
            now = self.now()
            self._catch_up(now)
            if self._done:
                done, self._done = self._done, []
                return done
            if until is not None and now >= until:
                return []
            t_next = self.device.next_completion_at()
            if t_next is None and until is None:
                return []
            wake_at = min(t for t in (t_next, until) if t is not None)
            delay = wake_at - now
            if delay > 0 and self._wake.wait(delay):
                self._wake.clear()
                self._catch_up(self.now())
                done, self._done = self._done, []
                return done  # possibly empty: the engine has news in its inbox

    def close(self) -> None:
        self.device.close()
