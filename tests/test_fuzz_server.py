"""Fuzz `vox serve -m demo` over HTTP and WebSocket: over 1,000 seeded hostile clients
(tests/support/fuzz_server.py) against the real command (a subprocess, a free port), in rounds of
concurrent cases with a good greedy request beside them. For each case: a 4xx JSON sentence, or an error
message and a close with a reason, or a clean close; never a 500. After each round: the gauges (active,
queued, KV pages, codec slots) are back to 0, /health is ok, and the neighbour's audio equals the same
request run alone. At the end the server's RSS growth over the run is printed (and bounded)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'voxcli[serve]')")
httpx = pytest.importorskip("httpx", reason="httpx is not installed (the test extra)")
ws_client = pytest.importorskip("websockets.sync.client", reason="websockets is not installed")
from support.fuzz_server import GOOD, MODEL, ServerCase, all_cases, schema_cases  # noqa: E402
from support.serve_util import free_port, metric  # noqa: E402
from voxcli.models.registry import families, find_family  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402

SEED = 20261201
ROUND = 32  # hostile cases at once, beside one good request
HEADER_S = BODY_S = 1.0
GAUGES = ("vox_active_requests", "vox_queued_requests", "vox_kv_pages_used", "vox_codec_slots_used")
# Batched rows may round differently than a row alone (the engine's batching-exactness bound is 1e-4):
# 3 steps of 16-bit PCM is 9.2e-5. A neighbour cut off or fed another row's audio differs by far more.
MAX_LSB = 3
NEIGHBOUR = {**GOOD, "input": "A neighbour speaks here, undisturbed.", "max_frames": 12}


# every demo family but `demo` (the full run's): each family's schema cases against its own server
OTHER_DEMOS = [(f.demos[0].name, f.options) for f in families() if f.demos and f.demos[0].name != MODEL]


@contextlib.contextmanager
def serving(model: str, tmp_path_factory) -> Iterator[tuple[str, int, subprocess.Popen, Any]]:
    """`vox serve -m model` as a subprocess on a free port: (url, port, process, its log file)."""
    port = free_port()
    env = {**os.environ, "VOX_CACHE": str(tmp_path_factory.getbasetemp() / "fuzz_serve_cache")}
    log = open(tmp_path_factory.mktemp("fuzz_serve_log") / "serve.log", "w+")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "voxcli", "serve", "-m", model, "--port", str(port), "-q",
                             "--header-timeout", str(HEADER_S), "--body-timeout", str(BODY_S)],
                            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=Path(__file__).parent.parent)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            log.seek(0)
            pytest.fail(f"vox serve -m {model} did not start: {log.read()[-2000:]}")
        time.sleep(0.2)
    try:
        yield url, port, proc, log
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serving(MODEL, tmp_path_factory) as running:
        yield running


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# --- one case ------------------------------------------------------------------------------------
def _json_error(status: int, ctype: str, text: str) -> str | None:
    """None when this is a 4xx JSON sentence; else what is wrong with it."""
    if not 400 <= status < 500:
        return f"status {status}"
    if "application/json" not in ctype:
        return f"{status} with content-type {ctype!r}: {text[:120]!r}"
    try:
        err = json.loads(text)["error"]
    except (ValueError, KeyError, TypeError):
        return f"{status} without an error object: {text[:120]!r}"
    message = err.get("message")
    sentence = isinstance(message, str) and message.strip().endswith((".", "?", "!"))
    if not sentence or err.get("code") != status:
        return f"{status} error is not a sentence with its code: {err!r:.200}"
    return None


def _raw_exchange(port: int, data: bytes | list[bytes], wait_s: float = 8.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=wait_s) as s:
        for i, part in enumerate(data if isinstance(data, list) else [data]):
            if i:
                time.sleep(0.1)
            try:
                s.sendall(part)
            except OSError:
                break
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except (TimeoutError, ConnectionResetError):
            pass
        return out


def _parse_raw(out: bytes) -> tuple[int, str, str]:
    """The first response on the connection: status, content type, body (by its content-length)."""
    head, _, body = out.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    headers = {k.strip().lower(): v.strip() for k, v in
               (line.split(b":", 1) for line in head.split(b"\r\n")[1:] if b":" in line)}
    if headers.get(b"content-length", b"").isdigit():
        body = body[:int(headers[b"content-length"])]
    return status, headers.get(b"content-type", b"").decode(), body.decode("utf-8", "replace")


def run_http(case: ServerCase, url: str, port: int) -> str | None:
    if case.kind == "json":
        body = case.payload if isinstance(case.payload, str) else json.dumps(case.payload)
        r = httpx.post(f"{url}/v1/audio/speech", content=body.encode("utf-8", "surrogatepass"),
                       headers={"content-type": "application/json"}, timeout=30)
        return _json_error(r.status_code, r.headers.get("content-type", ""), r.text)
    if case.kind == "raw_body":
        r = httpx.post(f"{url}/v1/audio/speech", content=case.payload,
                       headers={"content-type": case.extra["content_type"]}, timeout=30)
        return _json_error(r.status_code, r.headers.get("content-type", ""), r.text)
    if case.kind == "method":
        method, path = case.payload
        out = _raw_exchange(port, f"{method} {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n"
                                  f"content-length: 0\r\n\r\n".encode())
        status, ctype, text = _parse_raw(out)
        if 300 <= status < 400:
            return None  # a redirect (/path/ -> /path)
        return _json_error(status, ctype, text)
    if case.kind == "raw":
        out = _raw_exchange(port, case.payload)
        if not out:
            return None  # closed without an answer: a clean close
        status, ctype, text = _parse_raw(out)
        if status < 400 and status != 500:
            return None  # something the parser accepted (e.g. bare LF line ends): a normal answer
        return _json_error(status, ctype, text)
    if case.kind == "slow":
        t0 = time.monotonic()
        if case.payload == "headers":
            out = _raw_exchange(port, b"POST /v1/audio/speech HTTP/1.1\r\nhost: x\r\n", wait_s=HEADER_S + 8)
            bound = HEADER_S
        else:
            out = _raw_exchange(port, b"POST /v1/audio/speech HTTP/1.1\r\nhost: x\r\ncontent-type: "
                                      b"application/json\r\ncontent-length: 400\r\n\r\n{\"model\"",
                                wait_s=BODY_S + 8)
            bound = BODY_S
        waited = time.monotonic() - t0
        if not out:
            return f"closed without a 408 after {waited:.1f} s"
        status, ctype, text = _parse_raw(out)
        if status != 408 or waited > bound + 3:
            return f"{status} after {waited:.1f} s (bound {bound} s)"
        return _json_error(status, ctype, text)
    if case.kind == "leave":
        return _leave(case, port)
    raise AssertionError(case.kind)


def _leave(case: ServerCase, port: int) -> str | None:
    fmt = case.payload["fmt"]
    body = {**GOOD, "max_frames": 60 if case.payload["when"] == "mid-stream" else 8,
            "response_format": "pcm" if fmt == "sse" else fmt}
    if fmt == "sse":
        body["stream_format"] = "sse"
    data = json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                  b"content-length: " + str(len(data)).encode() + b"\r\n\r\n" + data)
        if case.payload["when"] != "before answer":
            s.recv(4096 if case.payload["when"] == "after first bytes" else 1)
            if case.payload["when"] == "mid-stream":
                s.recv(8192)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # reset
    return None


def run_ws(case: ServerCase, port: int) -> str | None:
    frames, expect = case.payload, case.expect
    leave = case.extra.get("leave", False)
    got: list = []
    close = None
    with ws_client.connect(f"ws://127.0.0.1:{port}/v1/audio/speech/live", open_timeout=10,
                           max_size=None) as ws:
        for f in frames:
            try:
                ws.send(f)
            except ConnectionClosed:
                break
        if leave:
            return None
        try:
            while True:
                got.append(ws.recv(timeout=30))
        except ConnectionClosed as e:
            close = e.rcvd
        except TimeoutError:
            return "no close within 30 s"
    texts = [json.loads(m) for m in got if isinstance(m, str)]
    errors = [t for t in texts if t.get("type") == "error"]
    done = [t for t in texts if t.get("type") == "done"]
    if any(e.get("code", 500) >= 500 for e in errors):
        return f"a server error: {errors}"
    if done and close is not None and close.code == 1000:
        return None if expect in ("ok", "any") else f"expected an error, got done ({frames!r:.80})"
    if expect == "ok":
        return f"a clean session ended with {errors or texts!r:.200}, close {close}"
    if close is None or close.code == 1000 or not close.reason:
        return f"closed without a reason: {close}, messages {texts!r:.200}"
    if errors:
        message = errors[-1].get("message", "")
        return None if message.endswith((".", "?", "!")) else f"error is not a sentence: {errors[-1]}"
    return None if close.code in (1002, 1007, 1009) else f"close {close} without an error message"


def run_case(case: ServerCase, url: str, port: int) -> str | None:
    try:
        return run_ws(case, port) if case.kind == "ws" else run_http(case, url, port)
    except Exception as e:  # noqa: BLE001 - a crash of the exchange is a finding too
        return f"{type(e).__name__}: {e}"


# --- the run -------------------------------------------------------------------------------------
def _settled(url: str) -> tuple[bool, str]:
    try:
        m = httpx.get(f"{url}/metrics", timeout=5).text
        health = httpx.get(f"{url}/health", timeout=5).json()
    except httpx.HTTPError as e:
        return False, repr(e)
    values = {g: metric(m, g) for g in GAUGES}
    return all(v == 0 for v in values.values()) and health["status"] == "ok", f"{values} {health}"


def _neighbour(url: str) -> bytes:
    r = httpx.post(f"{url}/v1/audio/speech", json=NEIGHBOUR, timeout=60)
    assert r.status_code == 200, r.text
    return r.content


def test_fuzz_server_over_a_thousand_hostile_clients(server):
    url, port, proc, log = server
    cases = all_cases(SEED, find_family(MODEL).options)  # type: ignore[union-attr]
    assert len(cases) >= 1000
    random.Random(SEED).shuffle(cases)
    alone = _neighbour(url)
    rss_start = _rss_mb(proc.pid)
    findings: list[str] = []
    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=ROUND + 1) as pool:
        for start in range(0, len(cases), ROUND):
            batch = cases[start:start + ROUND]
            beside = pool.submit(_neighbour, url)
            outcomes = list(pool.map(lambda c: (c, run_case(c, url, port)), batch))
            findings += [f"{c.kind} {c.label}: {why}" for c, why in outcomes if why is not None]
            a, b = np.frombuffer(alone, "<i2").astype(int), np.frombuffer(beside.result(), "<i2").astype(int)
            diff = int(np.abs(a - b).max()) if a.size == b.size else None
            if diff is None or diff > MAX_LSB:
                findings.append(f"round {start // ROUND}: the neighbour's audio differs from its run alone "
                                f"({b.size} samples for {a.size}, max diff {diff}; beside "
                                f"{[c.label for c in batch if c.kind in ('leave', 'ws')]})")
            deadline = time.monotonic() + 15
            ok, state = _settled(url)
            while not ok and time.monotonic() < deadline:
                time.sleep(0.1)
                ok, state = _settled(url)
            if not ok:
                findings.append(f"round {start // ROUND}: not settled: {state}")
            assert proc.poll() is None, "the server died"
    wall = time.monotonic() - t0
    rss_end = _rss_mb(proc.pid)
    rounds = len(range(0, len(cases), ROUND))
    print(f"\nfuzz server: {len(cases)} cases + {rounds} neighbours in {wall:.1f} s; "
          f"server RSS {rss_start:.0f} MB -> {rss_end:.0f} MB")
    log.seek(0)
    server_log = log.read()
    assert not findings, f"{len(findings)} findings:\n" + "\n".join(findings[:25])
    assert "Traceback" not in server_log, server_log[-3000:]
    assert rss_end - rss_start < 400, (rss_start, rss_end)


@pytest.mark.parametrize("model, schema", OTHER_DEMOS, ids=[m for m, _ in OTHER_DEMOS])
def test_fuzz_every_family_with_its_option_schema(model, schema, tmp_path_factory):
    """Every other demo family's server gets its own schema's cases (each option at each hostile value,
    each shared numeric field at its extremes; HTTP and WebSocket): a 4xx sentence or an error and a
    close each, then the server is settled and healthy, with nothing in its log but the lines it means."""
    cases = schema_cases(model, schema)
    with serving(model, tmp_path_factory) as (url, port, proc, log):
        with ThreadPoolExecutor(max_workers=ROUND) as pool:
            outcomes = list(pool.map(lambda c: (c, run_case(c, url, port)), cases))
        findings = [f"{c.kind} {c.label}: {why}" for c, why in outcomes if why is not None]
        deadline = time.monotonic() + 15
        ok, state = _settled(url)
        while not ok and time.monotonic() < deadline:
            time.sleep(0.1)
            ok, state = _settled(url)
        assert proc.poll() is None, "the server died"
        log.seek(0)
        server_log = log.read()
    print(f"\nfuzz {model}: {len(cases)} schema cases")
    assert ok, f"not settled: {state}"
    assert not findings, f"{len(findings)} of {len(cases)} findings:\n" + "\n".join(findings[:25])
    assert "Traceback" not in server_log, server_log[-3000:]
