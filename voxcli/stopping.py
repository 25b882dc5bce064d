"""Stopping within a bound: a front end (`vox serve`, `vox batch`) told to stop (Ctrl-C, SIGTERM) must
exit within a few seconds in every state, even when the engine cannot be stopped cleanly (a request
stuck on the engine thread: its own watchdog is the engine's business).

`close_within` runs a close on a helper thread and waits at most `seconds` for it; a caller whose
close did not finish says so in one sentence and leaves with `exit_now` (a stuck non-daemon thread
would otherwise hold the interpreter's exit forever). After a stop signal, `arm_hard_exit` leaves once
the process stops progressing (`HardExit`: not on a fixed timer, which cut slow cleanups on a loaded
machine), and `leave_without_workers` ends a process whose abandoned workers still run native code
without the abort Python's exit would give it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TypeVar

T = TypeVar("T")

# what a stopping front end grants the engine's close and its own workers, in seconds
STOP_BOUND_S = 5.0


def close_within(close: Callable[[], object], seconds: float | None = None) -> bool:
    """Run `close`; True when it returned (or raised) within `seconds` (`STOP_BOUND_S` when None, read
    at the call). Its errors are re-raised."""
    done = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            close()
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            failure.append(e)
        finally:
            done.set()

    threading.Thread(target=run, name="vox-close", daemon=True).start()
    if not done.wait(STOP_BOUND_S if seconds is None else seconds):
        return False
    if failure:
        raise failure[0]
    return True


class HardExit:
    """Leave with `code` once the process has stopped making progress: checked every `seconds`, it exits
    when no other thread ran (under `MIN_BUSY_SHARE` of a CPU, none runnable) since the last check, or
    `cap_s` after it was armed whatever happens. A fixed timer cannot tell a stuck cleanup from a slow
    one: on a loaded machine (load average 20 on 2 cores) a cleanup that takes 1 s of CPU needs 12 s of
    wall time, and was cut there (its .part file left, its "interrupted." unsaid). `progress` reads the
    other threads' CPU seconds (None: one is runnable now); `wait` sleeps unless cancelled; `leave` exits:
    tests drive all three."""

    def __init__(self, seconds: float, code: int, cap_s: float | None = None,
                 progress: Callable[[], float | None] | None = None,
                 wait: Callable[[float], bool] | None = None,
                 leave: Callable[[int], object] | None = None) -> None:
        self.seconds, self.code = seconds, code
        self.cap_s = max(HARD_EXIT_CAP_S, seconds) if cap_s is None else cap_s
        self.cancelled = threading.Event()
        self.progress = progress or _others_progress
        self.wait = wait or self.cancelled.wait
        self.leave = leave or exit_now

    def watch(self) -> None:
        """Wait, check, repeat (runs on the watcher's own daemon thread)."""
        waited, last = 0.0, self.progress()
        while True:
            if self.wait(self.seconds) or self.cancelled.is_set():
                return
            waited += self.seconds
            now = self.progress()
            ran = now is None or last is None or now - last >= MIN_BUSY_SHARE * self.seconds
            if ran and waited < self.cap_s:
                last = now
                continue
            self.leave(self.code)
            return


# a process still progressing this long after the stop is taken as stuck in a loop: it leaves anyway
HARD_EXIT_CAP_S = 120.0
# CPU share of one window below which the other threads count as idle (pollers, timers): a cleanup that
# gets any CPU at all on a loaded machine (1/10 of a core at load 20 on 2 cores) is far above it
MIN_BUSY_SHARE = 0.02


def _others_progress() -> float | None:
    """None while another thread of this process is runnable (Linux /proc: state R); otherwise the CPU
    seconds the other threads have used (the watcher's own are left out)."""
    if _another_thread_runnable():
        return None
    return time.process_time() - time.thread_time()


def _another_thread_runnable() -> bool:
    me = threading.get_native_id()
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:  # not Linux: CPU time alone says
        return False
    for tid in tasks:
        if tid == str(me):
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                stat = f.read()
        except OSError:  # the thread ended meanwhile
            continue
        if stat[stat.rfind(b")") + 2:][:1] == b"R":
            return True
    return False


_hard_exit: list[HardExit] = []  # the armed watcher, at most one


def arm_hard_exit(seconds: float, code: int) -> None:
    """Leave with `code` once the process stops progressing, checked every `seconds` (`HardExit`), unless
    it has ended by then (a daemon thread: a process that finishes its cleanup exits as usual). Arming
    twice keeps the first watcher."""
    if _hard_exit:
        return
    watcher = HardExit(seconds, code)
    _hard_exit.append(watcher)
    threading.Thread(target=watcher.watch, name="vox-hard-stop", daemon=True).start()


def hard_exit_armed() -> bool:
    return bool(_hard_exit)


def disarm_hard_exit() -> None:
    """Cancel an armed hard exit (a process that goes on after handling a stop: a test sending itself a
    signal, say)."""
    while _hard_exit:
        _hard_exit.pop().cancelled.set()


# Daemon threads that run work the process stopped waiting for: a preparation past its limit
# (engine/prepare_guard.py), a close past its bound (close_within). At interpreter exit Python 3.11 ends a
# daemon thread that comes back from native code with pthread_exit, and torch's C++ frames answer that
# unwinding with "terminate called without an active exception" (SIGABRT, exit 134, after the error line).
WORKER_THREADS = ("vox-prepare", "vox-close")


def workers_still_running() -> list[str]:
    return [t.name for t in threading.enumerate() if t.daemon and t.is_alive() and t.name in WORKER_THREADS]


def leave_without_workers(code: object) -> None:
    """Called with a process's exit status as it leaves: while one of our abandoned workers still runs,
    leave at once with that status (what is written is flushed; nothing else remains to clean); otherwise
    return and let the interpreter exit as usual."""
    if not workers_still_running():
        return
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message"): printed, status 1, as the interpreter does
        sys.stderr.write(f"{code}\n")
        code = 1
    exit_now(code)


def exit_now(code: int) -> None:
    """Leave the process at once (what is written is flushed; stuck threads are not waited for)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


@contextlib.contextmanager
def closed_within(opened: AbstractContextManager[T], code: Callable[[], int]) -> Iterator[T]:
    """`with opened` whose exit (an engine's close) is waited for at most `STOP_BOUND_S`: past it, one
    sentence and `exit_now(code())` (the caller's exit status for how the run went)."""
    value = opened.__enter__()
    try:
        yield value
    except BaseException as e:
        if not close_within(lambda err=e: opened.__exit__(type(err), err, err.__traceback__)):
            _stuck()
            exit_now(130 if isinstance(e, KeyboardInterrupt) else 1)
        raise
    if not close_within(lambda: opened.__exit__(None, None, None)):
        _stuck()
        exit_now(code())


def _stuck() -> None:
    sys.stderr.write(f"vox: error: the engine did not stop within {STOP_BOUND_S:g} s (a request is stuck on "
                     "its thread); exiting without it.\n")
