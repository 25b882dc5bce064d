"""Stopping within a bound: a front end (`vox serve`, `vox batch`) told to stop (Ctrl-C, SIGTERM) must
exit within a few seconds in every state, even when the engine cannot be stopped cleanly (a request
stuck on the engine thread: its own watchdog is the engine's business).

`close_within` runs a close on a helper thread and waits at most `seconds` for it; a caller whose
close did not finish says so in one sentence and leaves with `exit_now` (a stuck non-daemon thread
would otherwise hold the interpreter's exit forever).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
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


_hard_exit: list[threading.Timer] = []  # the armed timer, at most one


def arm_hard_exit(seconds: float, code: int) -> None:
    """Leave with `code` `seconds` from now unless the process has ended by then (a daemon timer: a
    process that finishes its cleanup in time exits as usual). Arming twice keeps the first timer."""
    if _hard_exit:
        return
    timer = threading.Timer(seconds, exit_now, args=(code,))
    timer.daemon = True
    timer.name = "vox-hard-stop"
    _hard_exit.append(timer)
    timer.start()


def hard_exit_armed() -> bool:
    return bool(_hard_exit)


def disarm_hard_exit() -> None:
    """Cancel an armed hard exit (a process that goes on after handling a stop: a test sending itself a
    signal, say)."""
    while _hard_exit:
        _hard_exit.pop().cancel()


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
