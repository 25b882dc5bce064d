"""Hostile HTTP clients against a real uvicorn on a free port (the sim H100 behind it): text that is not
text, bodies too large or too slow, slowloris headers, unparseable requests. Each gets a JSON sentence
(or a close), never a 500, and leaves the server healthy with its gauges at 0."""

from __future__ import annotations

import json
import socket
import time

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'voxcli[serve]')")
httpx = pytest.importorskip("httpx", reason="httpx is not installed (the test extra)")

from support.serve_util import metric, running_server, sim_service, wait_until  # noqa: E402

MODEL = "qwen3-tts-1.7b"
HEADER_S, BODY_S = 1.0, 1.0  # short bounds so the test is quick; the defaults are 10 s each


@pytest.fixture(scope="module")
def server():
    service = sim_service()
    service.limits.header_timeout_s = HEADER_S
    service.limits.body_timeout_s = BODY_S
    service.limits.idle_timeout_s = 1.0
    with running_server(service) as url:
        yield url, service


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _raw(url: str, data: bytes | list[bytes], wait_s: float = 5.0) -> bytes:
    """Send raw bytes (a list: in parts, 0.2 s apart), read until the server closes (or `wait_s`)."""
    with socket.create_connection(("127.0.0.1", _port(url)), timeout=wait_s) as s:
        for i, part in enumerate(data if isinstance(data, list) else [data]):
            if i:
                time.sleep(0.2)
            try:
                s.sendall(part)
            except OSError:  # the server already answered and closed
                break
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except TimeoutError:
            pass
        return out


def _json_body(response: bytes) -> dict:
    head, _, body = response.partition(b"\r\n\r\n")
    assert b"application/json" in head.lower(), response[:300]
    if b"transfer-encoding: chunked" in head.lower():  # one chunk then the terminator
        size, _, rest = body.partition(b"\r\n")
        body = rest[:int(size, 16)]
    return json.loads(body)


def _idle(url: str) -> bool:
    m = httpx.get(f"{url}/metrics").text
    return all(metric(m, g) == 0 for g in ("vox_active_requests", "vox_queued_requests", "vox_kv_pages_used",
                                           "vox_codec_slots_used"))


@pytest.mark.parametrize(("raw_input", "needle"), [
    ('"Hi \\ud800 there."', "unpaired UTF-16 surrogate (U+D800"),
    ('"\\udfff"', "unpaired UTF-16 surrogate"),
    ('"\\u0001\\u0002\\u001b"', "only control characters"),
    ('"\\u200b\\u0007 \\u0000"', "only control characters"),
])
def test_text_that_is_not_text_is_a_400_sentence(server, raw_input, needle):
    url, _ = server
    body = '{"model": "' + MODEL + '", "input": ' + raw_input + ', "fixed_frames": 4}'
    r = httpx.post(f"{url}/v1/audio/speech", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert needle in err["message"] and err["param"] == "input"


def test_a_surrogate_in_another_field_names_the_field(server):
    url, _ = server
    body = '{"model": "' + MODEL + '", "input": "Hi.", "voice": "a\\ud83d", "fixed_frames": 4}'
    r = httpx.post(f"{url}/v1/audio/speech", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "voice", r.text
    body = '{"model": "' + MODEL + '", "input": "Hi.", "options": {"k\\udc80": 1}, "fixed_frames": 4}'
    r = httpx.post(f"{url}/v1/audio/speech", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400 and "surrogate" in r.json()["error"]["message"], r.text


def test_an_oversized_chunked_body_is_413(server):
    url, service = server

    def chunks():
        for _ in range(20):
            yield b"x" * 8192  # 160 KB in chunks, no Content-Length

    r = httpx.post(f"{url}/v1/audio/speech", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413, r.text
    assert f"({service.limits.max_body_bytes} bytes)" in r.json()["error"]["message"]


def test_a_stalled_body_is_dropped_with_408_within_the_bound(server):
    url, _ = server
    with socket.create_connection(("127.0.0.1", _port(url)), timeout=10) as s:
        s.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                  b"content-length: 500\r\n\r\n{\"model\": ")
        t0 = time.monotonic()
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        waited = time.monotonic() - t0
    assert out.startswith(b"HTTP/1.1 408"), out[:200]
    assert "did not arrive within" in _json_body(out)["error"]["message"]
    assert BODY_S * 0.8 < waited < BODY_S + 2.0, waited


def test_slowloris_connections_are_closed_within_the_header_bound(server):
    url, _ = server
    socks = []
    t0 = time.monotonic()
    for _ in range(40):
        s = socket.create_connection(("127.0.0.1", _port(url)), timeout=10)
        s.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nhost: x\r\n")  # and never the rest
        socks.append(s)
    silent = socket.create_connection(("127.0.0.1", _port(url)), timeout=10)  # not even a byte
    closed_at = []
    for s in [*socks, silent]:
        out = b""
        while chunk := s.recv(65536):
            out += chunk
        closed_at.append(time.monotonic() - t0)
        s.close()
    assert max(closed_at) < HEADER_S + 2.0, closed_at
    assert min(closed_at) > HEADER_S * 0.8, closed_at
    assert httpx.get(f"{url}/health").json()["status"] == "ok"


def test_a_slow_header_trickle_gets_a_408_sentence(server):
    url, _ = server
    out = _raw(url, b"GET /health HTTP/1.1\r\nhost: x\r\n", wait_s=HEADER_S + 3)
    assert out.startswith(b"HTTP/1.1 408"), out[:200]
    assert "request headers did not arrive" in _json_body(out)["error"]["message"]


@pytest.mark.parametrize(("data", "status"), [
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET /health HTTP/1.1\r\n\r\n", 400),  # HTTP/1.1 without Host
    (b"GET /health HTTP/1.1\r\nhost: x\r\nbad header line\r\n\r\n", 400),
    ([b"GET /health HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * 20000, b"a\r\n\r\n"], 431),
    (b"POST /v1/audio/speech HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n", 400),
])
def test_protocol_errors_are_json(server, data, status):
    url, _ = server
    out = _raw(url, data)
    assert out.startswith(f"HTTP/1.1 {status}".encode()), out[:200]
    err = _json_body(out)["error"]
    assert err["code"] == status and err["message"].endswith(".")


def test_an_idle_kept_alive_connection_is_closed(server):
    url, _ = server
    with socket.create_connection(("127.0.0.1", _port(url)), timeout=10) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
        t0 = time.monotonic()
        out = b""
        while chunk := s.recv(65536):  # the answer, then the close once the connection idles
            out += chunk
        idle = time.monotonic() - t0
    assert out.startswith(b"HTTP/1.1 200") and 0.8 < idle < 3.0, (out[:40], idle)


def test_the_server_is_idle_and_healthy_after_the_hostile_clients(server):
    url, _ = server
    assert wait_until(lambda: _idle(url), timeout=5)
    r = httpx.post(f"{url}/v1/audio/speech", json={"model": MODEL, "input": "Still fine.", "fixed_frames": 8,
                                                    "response_format": "pcm"}, timeout=30)
    assert r.status_code == 200 and len(r.content) == 2 * 8 * 1920


_BIG_HEADER = b"x-big: " + b"a" * 20_000 + b"\r\n"
_SMALL_HEADERS = b"".join(b"x-h%d: v\r\n" % i for i in range(2000))
_HUGE_HEADER = b"x-big: " + b"a" * 64 * 1024 + b"\r\n"


@pytest.mark.parametrize(("head", "status"), [
    (b"GET /health HTTP/1.1\r\nhost: x\r\n" + _BIG_HEADER + b"\r\n", 431),
    (b"GET /health HTTP/1.1\r\nhost: x\r\n" + _SMALL_HEADERS + b"\r\n", 431),
    (b"GET /health HTTP/1.1\r\nhost: x\r\n" + _HUGE_HEADER + b"\r\n", 431),
    (b"GET /" + b"p" * 100_000 + b" HTTP/1.1\r\nhost: x\r\n\r\n", 414),
], ids=["20KB-header", "2000-headers", "64KB-header", "100KB-request-line"])
def test_a_head_over_the_bound_is_refused_even_in_one_piece(server, head, status):
    """Sent whole (one sendall): h11 alone bounds only an incomplete head and accepted these."""
    url, _ = server
    out = _raw(url, head)
    assert out.startswith(f"HTTP/1.1 {status}".encode()), out[:200]
    assert len(out) < 1000  # the request line is not echoed back
    err = _json_body(out)["error"]
    assert err["code"] == status and err["message"].endswith(".")


def test_head_bounds_are_exact():
    from voxcli.server.header_bounds import MAX_HEADER_BYTES, MAX_REQUEST_LINE_BYTES, head_problem

    line = b"GET /" + b"p" * (MAX_REQUEST_LINE_BYTES - 14) + b" HTTP/1.1\r\n"  # the line at the bound
    assert len(line) == MAX_REQUEST_LINE_BYTES + 2 and head_problem(line + b"host: x\r\n\r\n") is None
    assert head_problem(b"GET /p" + line[5:] + b"host: x\r\n\r\n").status == 414
    head = b"GET / HTTP/1.1\r\nhost: x\r\nx: "
    filler = b"a" * (MAX_HEADER_BYTES - len(head) - 4)
    assert head_problem(head + filler + b"\r\n\r\n") is None
    assert head_problem(head + filler + b"a\r\n\r\n").status == 431
    assert head_problem(head + filler + b"\r\n\r\n" + b"b" * 100_000) is None  # a pipelined body after it
    assert head_problem(head + filler + b"a" * 5).status == 431  # incomplete and already over
