"""Helpers for the `vox serve` tests: a real uvicorn server on a free loopback port, in a thread."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_server(service: Any, api_key: str | None = None) -> Iterator[str]:
    """Serve `service` on 127.0.0.1:<free port>; yields the base URL; stops (and closes the engine)."""
    import uvicorn

    from voxcli.server.app import create_app
    from voxcli.server.protocol import server_config

    app = create_app(service, api_key=api_key)
    port = free_port()
    server = uvicorn.Server(server_config(app, "127.0.0.1", port, service.limits, log_level="warning",
                                          timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, name="test-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def sim_service(*sets: str, max_input_chars: int = 4096, max_body_bytes: int = 64 * 1024) -> Any:
    """A SpeechService over the real-time simulated H100 (silent audio of the right length)."""
    from voxcli.server.service import Limits, SpeechService
    from voxcli.session import sim_session

    session = sim_session("qwen3-tts-1.7b", "h100", list(sets))
    return SpeechService(session, Limits(max_input_chars=max_input_chars, max_body_bytes=max_body_bytes))


def wait_until(predicate: Any, timeout: float = 5.0, step: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def metric(text: str, name: str, labels: str = "") -> float:
    """The value of one sample in Prometheus text (0 when absent)."""
    key = f"{name}{{{labels}}}" if labels else name
    for line in text.splitlines():
        if line.startswith(key + " "):
            return float(line.split()[-1])
    return 0.0
