"""Leaving after a stop signal on a loaded machine (issue 32): the hard exit a stop arms waits for a cleanup
that is progressing, however slowly, and still leaves one that is stuck; a preparation abandoned past its
limit does not abort the process at exit (rc 134, "terminate called without an active exception").

The watcher's own decisions are driven here (progress readings and waits are the test's); the subprocess
cases decide by what the process does, not by how fast: a thread computing is runnable whenever looked at."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from voxcli.stopping import MIN_BUSY_SHARE, HardExit

REPO = Path(__file__).resolve().parents[1]


def _drive(readings: list[float | None], cap_s: float = 1000.0) -> tuple[list[int], int]:
    """Run a watcher (1 s windows) over `readings` (the first is taken when it is armed); what it left
    with, and after how many windows."""
    left: list[int] = []
    windows: list[float] = []
    feed = iter(readings)

    def wait(seconds: float) -> bool:
        windows.append(seconds)
        return False

    watcher = HardExit(1.0, 130, cap_s=cap_s, progress=lambda: next(feed), wait=wait, leave=left.append)
    watcher.watch()
    return left, len(windows)


def test_a_cleanup_that_keeps_using_cpu_is_not_cut_and_one_that_stops_is_left():
    busy = MIN_BUSY_SHARE * 10  # ten times the idle threshold per window
    left, windows = _drive([0.0, busy, 2 * busy, 3 * busy, 3 * busy])
    assert left == [130] and windows == 4  # left only after the window in which nothing ran


def test_a_runnable_thread_is_progress_even_without_cpu_yet():
    left, windows = _drive([0.0, None, None, 0.0, 0.0])  # starved but runnable, twice
    assert left == [130] and windows == 4


def test_idle_pollers_do_not_hold_the_exit():
    left, windows = _drive([0.0, MIN_BUSY_SHARE / 4, MIN_BUSY_SHARE / 2])
    assert left == [130] and windows == 1


def test_a_process_that_never_stops_progressing_leaves_at_the_cap():
    left, windows = _drive([None] * 50, cap_s=3.0)
    assert left == [130] and windows == 3


def test_a_cancelled_watcher_never_leaves():
    left: list[int] = []
    watcher = HardExit(1.0, 130, progress=lambda: 0.0, wait=lambda s: True, leave=left.append)
    watcher.watch()
    assert left == []


_SLOW_CLEANUP = """
import os, signal, sys, threading
import voxcli.console as console
console.HARD_STOP_S = 0.02  # the real bound is 12 s; the cleanup below outlasts this many times over
def work():
    total = 0
    for i in range(3_000_000):
        total += i * i
    return total
with console.sigterm_as_interrupt():
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        threading.Event().wait(60)
    except KeyboardInterrupt:
        work()  # on this thread, then waited for on another (an engine close joining its loop)
        worker = threading.Thread(target=work)
        worker.start()
        worker.join()
        print("cleaned", flush=True)
sys.exit(130)
"""


def test_a_slow_cleanup_after_a_stop_signal_finishes():
    proc = subprocess.run([sys.executable, "-c", _SLOW_CLEANUP], capture_output=True, text=True, timeout=300,
                          cwd=REPO)
    assert proc.returncode == 130 and proc.stdout.strip() == "cleaned", (proc.returncode, proc.stderr)


_ABANDONED_PREPARE = """
import sys
import torch
import voxcli.cli as cli
from voxcli.engine.prepare_guard import PrepareGuard, PrepareTimeout

def stuck_in_torch():  # a voice clone's preparation on a machine too loaded to finish it in time
    a = torch.randn(400, 400)
    while True:
        a = torch.tanh(a @ a)

def app():
    try:
        PrepareGuard(limit_s=0.2).run(stuck_in_torch, "preparing the voice clone")
    except PrepareTimeout as e:
        sys.stderr.write(f"vox: error: {e}\\n")
        sys.exit(2)

cli.app = app
cli.main()
"""


def test_a_preparation_past_its_limit_exits_with_its_sentence_not_an_abort():
    pytest.importorskip("torch")
    for _ in range(2):  # the abort needed the worker inside torch at exit: nearly always, twice surely
        proc = subprocess.run([sys.executable, "-c", _ABANDONED_PREPARE], capture_output=True, text=True,
                              timeout=300, cwd=REPO)
        assert proc.returncode == 2, (proc.returncode, proc.stderr)
        assert proc.stderr.strip().splitlines() == [
            "vox: error: preparing the voice clone took longer than 0.2 s, so the request was abandoned; "
            "shorten its text or its options (a slow machine may raise the limit: --set "
            "prepare_limit_s=SECONDS)."]
