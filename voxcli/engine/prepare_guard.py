"""The last guard on per-request work outside a batch: a request's preparation (the program's `prepare`,
its KV planning `kv_tokens`) runs on a worker thread of its own, and the submitter waits for it at most
`limit_s` (PREPARE_LIMIT_S = 10 s by default). Past that the request fails with one sentence
(`PrepareTimeout`, an InputError: HTTP 400, a failed JSONL row) and everything else goes on.

Why a worker and not a timer on the engine loop: Python cannot interrupt a function running in a thread,
so a watchdog that only noticed a stuck `prepare` could not free the thread that runs it. The engine
loop therefore never runs a request's preparation: `Engine.submit` runs it here, so a request whose
preparation never ends holds one abandoned daemon thread (it keeps running until it returns, its result
then dropped), never the engine loop, another request, `Engine.close` or the process's exit. At most
`max_stuck` abandoned preparations may still be running; past that new requests are refused with a
sentence rather than piling up threads (the bound on what a stream of hostile requests can hold).
`close()` (from `Engine.close`) releases every submitter still waiting at once with `PrepareClosed`, so
a shutdown (SIGTERM, Ctrl-C) never waits out a preparation's limit.

Preparation is also bounded by construction (every option bounded by its family's schema,
models/options.py; planning loops sized by those bounds), so this guard should never fire; it is the
answer for what a bound missed. Deterministic tests drive `wait` (see tests/test_prepare_guard.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from voxcli.models.base import InputError

T = TypeVar("T")

PREPARE_LIMIT_S = 10.0
MAX_STUCK = 4


class PrepareTimeout(InputError):
    """A request whose preparation ran past the limit (or arrived while too many such still run)."""


class PrepareClosed(RuntimeError):
    """The engine closed while this request was being prepared."""


def _wait(done: threading.Event, limit_s: float) -> bool:
    return done.wait(limit_s)


class PrepareGuard:
    """Runs one request's preparation with a deadline (see the module docstring). `wait(done, limit_s)`
    returns whether `done` was set within the limit: the real clock's `Event.wait` unless a test drives
    it. `inline`: run on the caller's thread with no deadline (the virtual-time sim, where no wall clock
    passes and every preparation is the sim's own)."""

    def __init__(self, limit_s: float = PREPARE_LIMIT_S,
                 wait: Callable[[threading.Event, float], bool] = _wait, max_stuck: int = MAX_STUCK,
                 inline: bool = False) -> None:
        self.limit_s = limit_s
        self.wait = wait
        self.max_stuck = max_stuck
        self.inline = inline
        self._lock = threading.Lock()
        self.stuck = 0  # abandoned preparations still running
        self._waiting: set[threading.Event] = set()  # the `done` of each preparation a submitter waits on
        self._closed = False

    def close(self) -> None:
        """Release every submitter still waiting (their requests fail with PrepareClosed) and refuse new
        work; the preparations themselves run on until they return (they cannot be stopped)."""
        with self._lock:
            self._closed = True
            for done in self._waiting:
                done.set()

    def run(self, work: Callable[[], T], what: str = "preparing the request") -> T:
        """`work()`'s result, or its exception, or PrepareTimeout when it does not end within the limit."""
        if self.inline:
            return work()
        with self._lock:
            if self._closed:
                raise PrepareClosed("the engine was closed")
            if self.stuck >= self.max_stuck:
                raise PrepareTimeout(f"the engine still runs {self.stuck} request preparations that never "
                                     "ended, so it takes no new requests until one does; try again later.")
        done = threading.Event()
        box: dict[str, Any] = {}
        abandoned = threading.Event()
        with self._lock:
            self._waiting.add(done)

        def body() -> None:
            try:
                box["value"] = work()
            except BaseException as e:  # noqa: BLE001 - handed to the submitter as raised
                box["error"] = e
            finally:
                with self._lock:
                    done.set()
                    if abandoned.is_set():
                        self.stuck -= 1

        threading.Thread(target=body, name="vox-prepare", daemon=True).start()
        self.wait(done, self.limit_s)  # True/False alike: `box` below says whether the work ended
        with self._lock:
            self._waiting.discard(done)
            if not ("value" in box or "error" in box):  # still running: abandon it (it cannot be stopped)
                abandoned.set()
                self.stuck += 1
                if self._closed:
                    raise PrepareClosed("the engine was closed")
                raise PrepareTimeout(f"{what} took longer than {self.limit_s:g} s, so the request was "
                                     "abandoned; shorten its text or its options (a slow machine may "
                                     "raise the limit: --set prepare_limit_s=SECONDS).")
        if "error" in box:
            raise box["error"]
        return box["value"]  # type: ignore[no-any-return]
