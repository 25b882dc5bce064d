"""`vox serve` told to stop while its engine cannot close (a request stuck on the engine thread: the
close blocks on an event that is never set): the server still shuts down, and says the close was
stuck, instead of waiting for it forever. And `vox serve` in a subprocess stops on SIGTERM and SIGINT
within a few seconds once serving."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'voxcli[serve]')")
httpx = pytest.importorskip("httpx", reason="httpx is not installed (the test extra)")

import uvicorn  # noqa: E402
from support.serve_util import free_port, sim_service  # noqa: E402

import voxcli.stopping as stopping  # noqa: E402
from voxcli.server.app import create_app  # noqa: E402
from voxcli.server.protocol import server_config  # noqa: E402


def _up(server: uvicorn.Server, thread: threading.Thread) -> bool:
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            return False
        time.sleep(0.01)
    return True


def test_a_close_that_never_returns_does_not_hold_the_shutdown(monkeypatch):
    monkeypatch.setattr(stopping, "STOP_BOUND_S", 0.5)
    service = sim_service()
    never = threading.Event()
    real_close = service.close
    service.close = lambda: never.wait()  # type: ignore[method-assign]
    app = create_app(service)
    port = free_port()
    server = uvicorn.Server(server_config(app, "127.0.0.1", port, service.limits, log_level="warning",
                                          timeout_graceful_shutdown=1))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        assert _up(server, thread)
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
        server.should_exit = True
        thread.join(30)  # a close waited for forever never ends this
        assert not thread.is_alive()
        assert app.state.close_stuck
    finally:
        never.set()
        real_close()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_vox_serve_stops_on_a_signal_within_seconds(sig):
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "voxcli", "serve", "--executor", "sim", "--gpu", "h100",
                             "-m", "qwen3-tts-1.7b", "--port", str(port), "-q"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        else:
            pytest.fail("vox serve did not start")
        proc.send_signal(sig)
        t0 = time.monotonic()
        proc.wait(timeout=20)
        assert time.monotonic() - t0 < 15
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
