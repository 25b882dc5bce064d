"""Frames of decode steps of every running row, kept once per step instead of once per row.

The scheduler's hot path is a decode step of every running row: at 256 rows, storing each row's frame
in its own list is most of the host time of a step. Instead the step's frames go into this log as one
list (O(1) per step) and a row's frames stay there until the row is *settled*: `settle(r)` appends them
to `r.frames` with one C-level map per epoch, no Python per frame. `Request.n_frames` counts the settled
and the logged frames, so every reader sees the true count at any time.

A row is settled when its chunk launches (the codec needs the frames), when the LM batcher touches the
row with SETTLE_AFTER frames logged, before anything appends to `r.frames` directly (a row done or
without a frame; `flush`: every other path than a full step), and when the row stops running
(`detach`).

An epoch is a run of logged steps over one row list (the order of each step's frames). A row attached
in one epoch is a member of every later one until it is detached: any change to the running set makes
a new row list, hence a new epoch, and the rows still running are in it. An epoch is dropped once no
attached row still has frames in it; over an unchanged row list a new epoch starts every EPOCH_STEPS
steps, so memory stays bounded by how long rows go unsettled, not by how long the running set is stable.
"""

from __future__ import annotations

from collections import deque
from itertools import count
from operator import attrgetter, itemgetter
from typing import Any, Protocol


class LoggedRow(Protocol):
    """What the log reads and writes of a row (engine/request.py's Request has these): the log is a
    leaf, so a request can name its log epoch without the two modules importing each other."""

    id: int
    frames: list[Any]
    log_epoch: Epoch | None
    log_from: int

# an epoch over an unchanged row list ends after this many steps, so the steps every row has settled
# are dropped with it (rows settle at least once per chunk)
EPOCH_STEPS = 128
# the scheduler settles a row it touches once this many of its frames are logged: settling is cheap per
# frame but not free, and a launch should not settle hundreds of frames per chunk at once
SETTLE_AFTER = 32
_id_of = attrgetter("id")


class Epoch:
    __slots__ = ("log", "reqs", "first", "frames", "live", "next", "positions")

    def __init__(self, log: FrameLog, reqs: list[LoggedRow], first: int,
                 pos: dict[int, int] | None = None) -> None:
        self.log = log
        self.reqs = reqs  # row order of every step's frames
        self.first = first  # global number of its first step
        self.frames: list[list[Any]] = []  # per step, the frame of each row of reqs
        self.live = 0  # attached rows whose unsettled frames start in this epoch
        self.next: Epoch | None = None
        # request id -> index in reqs, built on first need (`pos`); None until then. Public: the log reads it
        # to hand an unchanged row list's index to the next epoch, and on the settle hot path
        self.positions = pos

    def pos(self, request_id: int) -> int:
        if self.positions is None:
            self.positions = dict(zip(map(_id_of, self.reqs), count()))
        return self.positions[request_id]


class FrameLog:
    def __init__(self) -> None:
        self.steps = 0  # steps logged so far (global step numbers run 1..steps)
        self.current: Epoch | None = None
        self._epochs: deque[Epoch] = deque()

    def step(self, reqs: list[LoggedRow], frames: list[Any], attach: list[LoggedRow]) -> None:
        """Log one step of `reqs`: frames[i] is reqs[i]'s frame. `attach`: rows of `reqs` not attached
        yet (they joined, or were flushed); their frames from this step on are logged."""
        e = self.current
        if e is None or e.reqs is not reqs or len(e.frames) >= EPOCH_STEPS:
            prev = e
            # the same rows: a fresh epoch only so that settled steps can be dropped; same positions
            pos = prev.positions if prev is not None and prev.reqs is reqs else None
            e = Epoch(self, reqs, self.steps + 1, pos)
            if prev is not None:
                prev.next = e
            self.current = e
            self._epochs.append(e)
        for r in attach:
            r.log_epoch = e
            r.log_from = self.steps
            e.live += 1
        e.frames.append(frames)
        self.steps += 1
        epochs = self._epochs
        while epochs[0].live == 0 and epochs[0] is not e:
            epochs.popleft()

    def settle(self, r: LoggedRow) -> None:
        """Append the row's logged frames to r.frames (it stays attached, now settled to this step)."""
        e = r.log_epoch
        last = self.steps
        if e is None or r.log_from == last:
            return
        i = r.log_from + 1 - e.first
        if e.next is None:  # every unsettled frame is in one epoch (the usual): one map, no epoch move
            pos = e.positions
            fs = e.frames
            r.frames.extend(map(itemgetter(e.pos(r.id) if pos is None else pos[r.id]), fs[i:] if i else fs))
            r.log_from = last
            return
        first = e
        frames, rid = r.frames, r.id
        while True:
            steps = e.frames
            if i < len(steps):
                frames.extend(map(itemgetter(e.pos(rid)), steps[i:] if i else steps))
            if e.next is None:
                break
            e = e.next
            i = 0
        if e is not first:
            first.live -= 1
            e.live += 1
            r.log_epoch = e
        r.log_from = last

    def detach(self, r: LoggedRow) -> None:
        """Settle the row and stop logging for it (it stopped running)."""
        if r.log_epoch is None:
            return
        self.settle(r)
        r.log_epoch.live -= 1
        r.log_epoch = None

    def flush(self) -> None:
        """Settle and detach every row: someone else will append to their frames directly."""
        if self.current is not None:
            for r in self.current.reqs:
                if r.log_epoch is not None:
                    self.detach(r)
        self.current = None
        self._epochs.clear()


def settle(r: LoggedRow) -> None:
    """Settle a row through the log it is attached to (no-op for a row in none): for a part that needs a
    row's frames in r.frames (a chunk's launch or hand-off) without holding the log."""
    e = r.log_epoch
    if e is not None:
        e.log.settle(r)
