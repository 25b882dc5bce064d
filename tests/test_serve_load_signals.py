"""What the server reports about load and about its clients: a Retry-After that follows the completion
rate right after startup, and a slow reader counted as "stopped_reading", never as "done"."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'voxcli[serve]')")
httpx = pytest.importorskip("httpx", reason="httpx is not installed (the test extra)")

from support.serve_util import metric, running_server, sim_service, wait_until  # noqa: E402

MODEL = "qwen3-tts-1.7b"


def test_retry_after_just_after_startup_follows_the_completion_rate():
    """Two quick requests finish, then the queue fills: the 503's Retry-After is the time the queue takes
    at the rate just seen (a second or two), not a 30 s window's artefact (it was 45 s)."""
    service = sim_service("admission=deadline", "max_running=1", "max_queue=1")
    quick = {"model": MODEL, "input": "Quick.", "fixed_frames": 5, "response_format": "pcm"}
    slow = {**quick, "fixed_frames": 400}
    with running_server(service) as url:
        for _ in range(2):
            assert httpx.post(f"{url}/v1/audio/speech", json=quick, timeout=30).status_code == 200
        answers: list[httpx.Response] = []
        lock = threading.Lock()
        all_in = threading.Event()

        def one() -> None:
            with httpx.Client(timeout=30) as c, c.stream("POST", f"{url}/v1/audio/speech", json=slow) as r:
                r.read() if r.status_code != 200 else next(r.iter_raw())
                with lock:
                    answers.append(r)
                    if len(answers) == 4:
                        all_in.set()
                all_in.wait(30)

        threads = [threading.Thread(target=one) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    refused = [r for r in answers if r.status_code == 503]
    assert refused, [r.status_code for r in answers]
    # the quick requests took well under a second each; two waiting at that rate is seconds, not 45
    assert all(1 <= int(r.headers["retry-after"]) <= 10 for r in refused), \
        ([r.headers["retry-after"] for r in refused], service.retry.mean_duration())


def test_a_reader_that_stops_is_counted_stopped_reading_and_dropped():
    service = sim_service()
    service.limits.write_stall_s = 1.0
    service.limits.max_unread_bytes = 64 * 1024
    body = json.dumps({"model": MODEL, "input": "A long one.", "fixed_frames": 2000,
                       "response_format": "pcm"}).encode()
    with running_server(service) as url:
        port = int(url.rsplit(":", 1)[1])
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)  # a small window: the stall shows soon
        s.connect(("127.0.0.1", port))
        s.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                  b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        got = 0
        while got < 100_000:  # 100 KB of 7.7 MB, then it stops reading (and keeps the connection)
            got += len(s.recv(16384))

        def counted() -> bool:
            return metric(httpx.get(f"{url}/metrics").text, "vox_requests_total",
                          'outcome="stopped_reading"') == 1

        assert wait_until(counted, timeout=20), httpx.get(f"{url}/metrics").text
        text = httpx.get(f"{url}/metrics").text
        assert metric(text, "vox_requests_total", 'outcome="done"') == 0
        assert wait_until(lambda: service.active == 0, timeout=5)
        assert metric(httpx.get(f"{url}/metrics").text, "vox_kv_pages_used") == 0
        # the server dropped the connection: what is left to read ends (EOF or a reset)
        s.settimeout(5)
        t0 = time.monotonic()
        try:
            while s.recv(1 << 20):
                pass
        except ConnectionResetError:
            pass
        assert time.monotonic() - t0 < 5
        s.close()
        # a reader that reads everything is "done"
        r = httpx.post(f"{url}/v1/audio/speech", content=body.replace(b"2000", b"20"),
                       headers={"content-type": "application/json"}, timeout=30)
        assert r.status_code == 200
        assert wait_until(lambda: metric(httpx.get(f"{url}/metrics").text, "vox_requests_total",
                                         'outcome="done"') == 1, timeout=5)


def _post_raw(port: int, body: bytes, connection: str) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)  # a small window: what is unread stays ours
    s.connect(("127.0.0.1", port))
    s.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
              b"connection: " + connection.encode() + b"\r\n"
              b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    return s


@pytest.mark.parametrize(("connection", "frames", "idle_s", "stall_s"), [
    ("close", 150, 5.0, 1.0),
    ("keep-alive", 150, 5.0, 1.0),
    # the idle timer closes the kept-alive connection before the stall bound, ~200 KB unread
    ("keep-alive", 78, 0.5, 3.0),
])
def test_done_only_when_the_client_read_the_whole_stream_whatever_its_connection_header(
        connection, frames, idle_s, stall_s):
    """A stream small enough to fit the server's buffers (every chunk is handed over at once), a reader
    that takes 100 KB and stops with its socket open: stopped_reading, never done (with `Connection:
    close`, or the keep-alive idle timer closing the connection, the closed transport hid the unread
    bytes and it counted done)."""
    service = sim_service()
    service.limits.write_stall_s = stall_s
    service.limits.idle_timeout_s = idle_s
    body = json.dumps({"model": MODEL, "input": "A short one.", "fixed_frames": frames,
                       "response_format": "pcm"}).encode()
    with running_server(service) as url:
        port = int(url.rsplit(":", 1)[1])
        s = _post_raw(port, body, connection)
        got = 0
        while got < 100_000:
            got += len(s.recv(16384))

        def outcome() -> str | None:
            text = httpx.get(f"{url}/metrics").text
            for name in ("done", "stopped_reading"):
                if metric(text, "vox_requests_total", f'outcome="{name}"') == 1:
                    return name
            return None

        assert wait_until(lambda: outcome() is not None, timeout=20), httpx.get(f"{url}/metrics").text
        assert outcome() == "stopped_reading"
        s.close()
        # the same request read to its end is done
        s = _post_raw(port, body, connection)
        s.settimeout(20)
        data = b""
        while not data.endswith(b"0\r\n\r\n"):
            chunk = s.recv(65536)
            assert chunk, data[-100:]
            data += chunk
        assert wait_until(lambda: metric(httpx.get(f"{url}/metrics").text, "vox_requests_total",
                                         'outcome="done"') == 1, timeout=20)
        s.close()
