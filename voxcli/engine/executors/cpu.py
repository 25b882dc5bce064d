"""The cpu executor: one worker thread per lane, each calling the model program's stage functions.

Torch releases the GIL inside its kernels, so the LM lane and the codec lanes really overlap on a
multi-core host (each lane uses torch's intra-op threads; `config.threads` sets their number). Busy
flags change only on the host thread (set by `launch`, cleared when `wait` hands the completion back),
so the engine and the scheduler always agree on which lanes are free. A stage exception becomes
`Completion.error`; the engine fails the affected requests and keeps going. A stage that raises is first
re-run in parts to find the rows responsible (engine/isolation.py); only those fail."""

from __future__ import annotations

import queue
import threading
from typing import Any

from voxcli.engine.clock import WallClock
from voxcli.engine.executors.base import Completion, Executor, LaneName, Work
from voxcli.engine.executors.stages import run_work_isolated
from voxcli.engine.lanes import LaneLayout
from voxcli.models.base import ModelProgram

_WAKE = object()


def _torch_threads() -> int:
    import torch

    return torch.get_num_threads()


class CpuExecutor(Executor):
    realtime = True

    def __init__(self, program: ModelProgram, layout: LaneLayout, threads: int = 0,
                 clock: WallClock | None = None) -> None:
        # torch's thread count is process-wide: remember it so close() gives it back.
        self._threads_before = _torch_threads() if threads > 0 else 0
        if threads > 0:
            import torch

            torch.set_num_threads(threads)
        self.program = program
        self.layout = layout
        self.clock = clock or WallClock()
        self._busy: dict[str, bool] = {lane: False for lane in layout.lanes}
        self._done: queue.Queue[Any] = queue.Queue()
        self._inboxes: dict[str, queue.Queue[Work | None]] = {}
        self._threads: list[threading.Thread] = []
        for lane in layout.lanes:
            inbox: queue.Queue[Work | None] = queue.Queue()
            t = threading.Thread(target=self._worker, args=(inbox,), name=f"vox-lane-{lane}", daemon=True)
            self._inboxes[lane] = inbox
            self._threads.append(t)
            t.start()

    def now(self) -> float:
        return self.clock.now()

    def busy(self, lane: LaneName) -> bool:
        return self._busy[lane]

    def launch(self, work: Work) -> None:
        if self._busy[work.lane]:
            raise RuntimeError(f"lane {work.lane} already has a batch in flight")
        if self.layout.serialized and any(self._busy.values()):
            raise RuntimeError(f"policy sync serializes lanes, but {work.lane} was launched beside another")
        self._busy[work.lane] = True
        self._inboxes[work.lane].put(work)

    def _worker(self, inbox: queue.Queue[Work | None]) -> None:
        while True:
            work = inbox.get()
            if work is None:
                return
            started = self.clock.now()
            reruns = 0
            try:  # a row whose data makes the stage raise fails alone (engine/isolation.py)
                done = run_work_isolated(self.program, work)
                result, error, reruns = done.results, None, done.reruns
            except Exception as e:  # not a row's fault: the engine fails the batch's requests
                result, error = None, e
            self._done.put(Completion(work, started, self.clock.now(), result, error, reruns))

    def interrupt(self) -> None:
        """Wake a blocked `wait` (a new request or a cancel arrived on another thread)."""
        self._done.put(_WAKE)

    def wait(self, until: float | None) -> list[Completion]:
        if until is None and not any(self._busy.values()):
            return []
        timeout = None if until is None else max(0.0, until - self.clock.now())
        items: list[Any] = []
        try:
            items.append(self._done.get(timeout=timeout))
        except queue.Empty:
            return []
        while True:
            try:
                items.append(self._done.get_nowait())
            except queue.Empty:
                break
        done = [c for c in items if c is not _WAKE]
        for c in done:
            self._busy[c.work.lane] = False
        return done

    def close(self) -> None:
        for inbox in self._inboxes.values():
            inbox.put(None)
        for t in self._threads:
            t.join(timeout=10)
        if self._threads_before:
            import torch

            torch.set_num_threads(self._threads_before)
