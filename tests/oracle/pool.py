"""Run oracle scripts through fork servers (tests/oracle/fork_worker.py), one per oracle interpreter and
set of first imports, kept for the test session: a script's torch / transformers / qwen_tts imports are
paid once per session instead of once per run (5-12 s of CPU each, about 20 runs in the suite).

Each run still gets a process of its own (a child forked after those imports), the same environment, cwd
and arguments as `python SCRIPT ARGS...`, and the same outcome: its return code, stdout and stderr.
VOX_ORACLE_FRESH=1 runs every script in a fresh interpreter instead (the old way, for a suspicious diff).
At most MAX_WORKERS stay alive (each holds its imports in memory); the least recently used one goes.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import signal
import subprocess
import tempfile
from pathlib import Path

WORKER = Path(__file__).resolve().parent / "fork_worker.py"
MAX_WORKERS = 2
PER_RUN_ENV = {"PYTEST_CURRENT_TEST"}

_workers: dict[tuple, subprocess.Popen] = {}


def _close(key: tuple) -> None:
    proc = _workers.pop(key)
    if proc.stdin:
        proc.stdin.close()  # EOF: the worker's loop ends
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        _kill(proc)
    proc.log.close()  # type: ignore[attr-defined]


def _kill(proc: subprocess.Popen) -> None:
    """The worker and the child it is running (its own process group)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _close_all() -> None:
    for key in list(_workers):
        _close(key)


atexit.register(_close_all)


def _worker(python: str, preload: tuple[str, ...], env: dict[str, str], cwd: str) -> subprocess.Popen:
    # pytest names the running test in the environment: that one variable may differ between the runs a
    # worker serves (each child gets the whole environment of its own request)
    key = (python, preload, cwd, tuple(sorted((k, v) for k, v in env.items() if k not in PER_RUN_ENV)))
    proc = _workers.pop(key, None)
    if proc is not None and proc.poll() is None:
        _workers[key] = proc  # most recently used last
        return proc
    while len(_workers) >= MAX_WORKERS:
        _close(next(iter(_workers)))
    log = tempfile.TemporaryFile("w+")  # the worker's own stderr (its imports' warnings), read if it dies
    proc = subprocess.Popen([python, str(WORKER), *preload], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=log, text=True, env=env, cwd=cwd, start_new_session=True)
    proc.log = log  # type: ignore[attr-defined]
    _workers[key] = proc
    return proc


def run_script(python: str, script: Path, args: list[str], env: dict[str, str], cwd: str, timeout: float,
               preload: tuple[str, ...] = ("numpy", "torch")) -> subprocess.CompletedProcess:
    """`python script *args` with `env` in `cwd`, as subprocess.run(capture_output=True, text=True) returns
    it; `preload`: modules the script imports first anyway, before any stub or shim of its own."""
    argv = [python, str(script), *args]
    if os.environ.get("VOX_ORACLE_FRESH") == "1":
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)
    proc = _worker(python, preload, env, cwd)
    with tempfile.TemporaryDirectory(prefix="vox-oracle-") as d:
        out, err = Path(d) / "stdout", Path(d) / "stderr"
        req = {"script": str(script), "args": list(args), "env": env, "stdout": str(out), "stderr": str(err)}
        assert proc.stdin is not None and proc.stdout is not None
        line = ""
        try:
            proc.stdin.write(json.dumps(req) + "\n")
            proc.stdin.flush()
            with selectors.DefaultSelector() as sel:
                sel.register(proc.stdout, selectors.EVENT_READ)
                if not sel.select(timeout):
                    _kill(proc)  # the next run starts a new worker
                    raise subprocess.TimeoutExpired(argv, timeout)
            line = proc.stdout.readline()
        except BrokenPipeError:
            pass
        if not line:  # the worker itself died (its imports failed, say): report it as the run's failure
            proc.wait()
            proc.log.seek(0)  # type: ignore[attr-defined]
            worker_err = proc.log.read()  # type: ignore[attr-defined]
            return subprocess.CompletedProcess(argv, proc.returncode or 1, "",
                                               f"oracle fork worker {preload} died:\n{worker_err}")
        rc = json.loads(line)["rc"]
        return subprocess.CompletedProcess(argv, rc, out.read_text(errors="replace"),
                                           err.read_text(errors="replace"))
