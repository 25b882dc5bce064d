"""The live WebSocket against hostile clients: every frame type in every state (before start, while text
streams in, after end) gets a JSON error and a close with a reason, or a clean close; nothing the
session started (its job, its text-in thread, pages, slot) outlives the socket."""

from __future__ import annotations

import json
import random
import socket
import threading

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'voxcli[serve]')")
httpx = pytest.importorskip("httpx", reason="httpx is not installed (the test extra)")
ws_client = pytest.importorskip("websockets.sync.client", reason="websockets is not installed")
from support.serve_util import metric, running_server, sim_service, wait_until  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402

START = json.dumps({"type": "start", "response_format": "pcm", "max_frames": 6})


@pytest.fixture(scope="module")
def server():
    service = sim_service()
    service.limits.ws_start_timeout_s = 1.0
    service.limits.ws_idle_timeout_s = 1.0
    with running_server(service) as url:
        yield url.replace("http", "ws") + "/v1/audio/speech/live", url, service


def _settled(url: str) -> bool:
    m = httpx.get(f"{url}/metrics").text
    gauges = ("vox_active_requests", "vox_queued_requests", "vox_kv_pages_used", "vox_codec_slots_used")
    text_in = [t for t in threading.enumerate() if t.name == "vox-text-in"]
    return all(metric(m, g) == 0 for g in gauges) and not text_in


def _until_closed(ws) -> tuple[list, object]:
    """Every message until the server closes; (messages, the close frame)."""
    got = []
    try:
        while True:
            got.append(ws.recv(timeout=10))
    except ConnectionClosed as e:
        return got, e.rcvd


def _error_then_close(ws, status: int, needle: str) -> None:
    got, close = _until_closed(ws)
    errors = [json.loads(m) for m in got if isinstance(m, str) and json.loads(m)["type"] == "error"]
    assert errors, got
    assert errors[-1]["code"] == status and needle in errors[-1]["message"], errors[-1]
    assert close is not None and close.code != 1000 and close.reason, close


@pytest.mark.parametrize(("frames", "status", "needle"), [
    ([b"\x00\x01binary"], 400, "not a binary frame"),
    (["not json"], 422, "start object"),
    (['{"type": "text", "text": "hi"}'], 422, "start object"),
    (['{"type": "start", "voice": "a\\ud800"}'], 400, "surrogate"),
    (['{"type": "start", "bogus": 1}'], 422, "bogus"),
    ([], 408, "no start message"),  # silent after connecting
])
def test_bad_first_frames(server, frames, status, needle):
    ws_url, url, _ = server
    with ws_client.connect(ws_url) as ws:
        for f in frames:
            ws.send(f)
        _error_then_close(ws, status, needle)
    assert wait_until(lambda: _settled(url), timeout=5)


@pytest.mark.parametrize(("frames", "status", "needle"), [
    ([b"\xff\xfe"], 400, "binary frames carry no text"),
    (["Hello there. ", b"bin"], 400, "binary frames carry no text"),
    (['{"type": "start"}'], 400, "not allowed while text streams in"),
    (['{"type": "text", "text": 5}'], 400, "must be a string"),
    (['{"type": "text", "text": "bad \\udc00 one"}'], 400, "surrogate"),
    (["Some text. ", '{"type": "end"}', "more after the end"], 400, "already ended"),
    (["Hello"], 408, "no text for"),  # then silence
    (["\x01\x02 \x1b", '{"type": "end"}'], 400, "only control characters"),
])
def test_bad_frames_after_start(server, frames, status, needle):
    ws_url, url, _ = server
    with ws_client.connect(ws_url) as ws:
        ws.send(START)
        for f in frames:
            ws.send(f)
        _error_then_close(ws, status, needle)
    assert wait_until(lambda: _settled(url), timeout=5), httpx.get(f"{url}/metrics").text


def test_leaving_at_any_point_frees_everything(server):
    ws_url, url, _ = server
    for step in range(4):
        with ws_client.connect(ws_url) as ws:
            if step >= 1:
                ws.send(START)
            if step >= 2:
                ws.send("A sentence that is long enough to be spoken now. And")
            if step >= 3:
                ws.recv(timeout=10)  # speaking
        assert wait_until(lambda: _settled(url), timeout=5), step


def test_twenty_concurrent_garbage_sessions_end_with_gauges_at_zero(server):
    ws_url, url, _ = server
    failures: list[str] = []

    def session(seed: int) -> None:
        rng = random.Random(seed)
        try:
            with ws_client.connect(ws_url) as ws:
                if rng.random() < 0.8:
                    ws.send(START)
                for _ in range(rng.randint(1, 6)):
                    kind = rng.randrange(6)
                    if kind == 0:
                        ws.send(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64))))
                    elif kind == 1:
                        ws.send("".join(chr(rng.randint(32, 0x2FF)) for _ in range(rng.randint(1, 40))))
                    elif kind == 2:
                        ws.send(json.dumps({"type": rng.choice(["text", "end", "start", "x", None]),
                                            "text": rng.choice(["Hi. ", 3, None, "Fine words here. "])}))
                    elif kind == 3:
                        ws.send("{" * rng.randint(1, 5))
                    elif kind == 4:
                        ws.send("Sentence number one is here. ")
                    else:
                        break  # leave abruptly
                _until_closed(ws) if rng.random() < 0.5 else None
        except (ConnectionClosed, OSError, TimeoutError):
            pass
        except Exception as e:  # noqa: BLE001 - collected for the assertion
            failures.append(f"{seed}: {e!r}")

    threads = [threading.Thread(target=session, args=(s,)) for s in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures
    assert wait_until(lambda: _settled(url), timeout=10), httpx.get(f"{url}/metrics").text
    assert httpx.get(f"{url}/health").json()["status"] == "ok"


def test_a_refused_handshake_is_a_json_sentence(server):
    """No WebSocket on that path (404), or no API key (401): an HTTP answer with the JSON error, not a
    bare 403."""
    from websockets.exceptions import InvalidStatus

    ws_url, _, _ = server
    with pytest.raises(InvalidStatus) as e:
        ws_client.connect(ws_url.replace("/v1/audio/speech/live", "/v1/audio/speech"))
    assert e.value.response.status_code == 404
    assert "no WebSocket endpoint /v1/audio/speech" in json.loads(e.value.response.body)["error"]["message"]
    with running_server(sim_service(), api_key="k") as keyed:
        with pytest.raises(InvalidStatus) as e:
            ws_client.connect(keyed.replace("http", "ws") + "/v1/audio/speech/live")
    assert e.value.response.status_code == 401
    assert "API key" in json.loads(e.value.response.body)["error"]["message"]


def _raw_ws(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /v1/audio/speech/live HTTP/1.1\r\nhost: x\r\nupgrade: websocket\r\n"
              b"connection: upgrade\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
              b"sec-websocket-version: 13\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return s


def _frame(opcode: int, payload: bytes) -> bytes:
    """One masked client frame (RFC 6455 section 5.2), payload under 126 bytes."""
    mask = b"\x01\x02\x03\x04"
    return bytes([0x80 | opcode, 0x80 | len(payload)]) + mask + bytes(b ^ mask[i % 4] for i, b in
                                                                      enumerate(payload))


def _close_frame(s: socket.socket) -> tuple[int, str]:
    """Read server frames until its close frame: (code, reason)."""
    while True:
        b0, b1 = s.recv(1)[0], s.recv(1)[0]
        n = b1 & 0x7F
        if n == 126:
            n = int.from_bytes(s.recv(2), "big")
        payload = b""
        while len(payload) < n:
            payload += s.recv(n - len(payload))
        if b0 & 0x0F == 0x8:
            return int.from_bytes(payload[:2], "big"), payload[2:].decode("utf-8", "replace")


@pytest.mark.parametrize("before", [[], [json.dumps({"type": "start", "max_frames": 4}).encode()]])
def test_a_text_frame_that_is_not_utf8_is_closed_with_a_reason(server, before):
    ws_url, url, _ = server
    s = _raw_ws(int(url.rsplit(":", 1)[1]))
    with s:
        for f in before:
            s.sendall(_frame(0x1, f))
        s.sendall(_frame(0x1, b"Hi \xff\xfe there."))
        code, reason = _close_frame(s)
    assert code == 1007 and "not UTF-8 (byte 0xff at offset 3)" in reason, (code, reason)
    assert wait_until(lambda: _settled(url), timeout=5)


@pytest.mark.parametrize("started", [False, True])
def test_a_frame_over_the_size_limit_gets_an_error_message_then_the_close(server, started):
    """70,000 characters in one frame (the limit is 64 KiB): the client hears why, then 1009."""
    ws_url, url, _ = server
    with ws_client.connect(ws_url, max_size=None) as ws:
        if started:
            ws.send(START)
        ws.send("word " * 14_000)
        got, close = _until_closed(ws)
    errors = [json.loads(m) for m in got if isinstance(m, str) and json.loads(m)["type"] == "error"]
    assert errors and errors[-1]["code"] == 413 and "larger than this server accepts" in errors[-1]["message"]
    assert close is not None and close.code == 1009, close
    assert wait_until(lambda: _settled(url), timeout=5)


@pytest.mark.parametrize("model", ["tts-1", "tts-1-hd", "gpt-4o-mini-tts"])
def test_start_accepts_the_openai_model_names_as_http_does(server, model):
    ws_url, url, _ = server
    with ws_client.connect(ws_url) as ws:
        ws.send(json.dumps({"type": "start", "model": model, "response_format": "pcm", "max_frames": 4}))
        ws.send("Hello there.")
        ws.send('{"type": "end"}')
        got, close = _until_closed(ws)
    assert json.loads(got[-1])["type"] == "done", got[-3:]
    assert close is not None and close.code == 1000
    assert wait_until(lambda: _settled(url), timeout=5)
