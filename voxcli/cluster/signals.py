"""Load signals pushed by the replicas to the front door: one long-lived streaming call per replica.

Routing needs each replica's slack (LM, both) or room (codec). Asking for it is a Serve request per replica
per period, each paying the whole request path (router, replica queue, asyncio task, reply); a request
routed on an answer it waited for pays a blocking round trip. Instead the front door opens ONE streaming
call per replica (`load_signals`), and the replica yields its stats every `period_s`: each report is one
streamed item (no request path), and the front door routes on the latest report it holds, never waiting.

A replica that dies ends its stream with an error: its backend is marked unreported (routed to last) and
the front door reopens the stream after `retry_s` (the restarted replica answers again).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

SIGNAL_PERIOD_S = 0.2
RETRY_S = 1.0


async def push_signals(stats: Callable[[], dict[str, float]],
                       period_s: float) -> AsyncIterator[dict[str, float]]:
    """The replica side: its stats now, then every `period_s`, until the front door cancels the call."""
    while True:
        yield stats()
        await asyncio.sleep(period_s)


class SignalFeed:
    """The front door side: a thread per replica that keeps its latest report in `store(stats)` (None
    while the replica's stream is broken). `close` cancels every stream."""

    def __init__(self, handles: list[tuple[str, Any]], store: Callable[[str, dict[str, float] | None], None],
                 period_s: float = SIGNAL_PERIOD_S, retry_s: float = RETRY_S) -> None:
        self._store, self._period, self._retry = store, period_s, retry_s
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._live: dict[str, Any] = {}  # name -> its open streaming response (cancelled by close)
        self.reports = 0  # reports received, all replicas (the bench's count)
        self._threads = [threading.Thread(target=self._follow, args=(name, handle), daemon=True,
                                          name=f"vox-signals-{name}") for name, handle in handles]
        for t in self._threads:
            t.start()

    def _follow(self, name: str, handle: Any) -> None:
        while not self._closed.is_set():
            try:
                resp = handle.options(method_name="load_signals", stream=True).remote(self._period)
                with self._lock:
                    self._live[name] = resp
                if self._closed.is_set():
                    resp.cancel()
                    return
                for stats in resp:
                    self.reports += 1
                    self._store(name, stats)
            except Exception:  # noqa: BLE001 - the replica is down (restarting): unreported meanwhile
                pass
            if self._closed.is_set():
                return
            self._store(name, None)
            self._closed.wait(self._retry)

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            live = list(self._live.values())
        for resp in live:
            try:
                resp.cancel()
            except Exception:  # noqa: BLE001 - already over
                pass
