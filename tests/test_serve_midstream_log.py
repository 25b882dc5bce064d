"""A speech that fails after its audio began: the body is cut (the client sees an incomplete chunked
body) and the server log has one line saying why, not uvicorn's "Exception in ASGI application"
traceback."""

from __future__ import annotations

import json
import logging
import socket
from typing import Any

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'voxcli[serve]')")

from support.serve_util import running_server, sim_service  # noqa: E402

from voxcli.engine.stream import RequestFailed  # noqa: E402


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _fails_after_audio(engine: Any, requests: Any, on_audio: Any, sample_rate: int, stop: Any) -> None:
    on_audio(np.zeros(4800, dtype=np.float32))
    raise RequestFailed("the codec replica went away")


def test_a_mid_stream_failure_is_one_log_line_and_a_cut_body(monkeypatch):
    monkeypatch.setattr("voxcli.speak_choice.speak", _fails_after_audio)  # Session.speak's loop
    records = _Records()
    log = logging.getLogger("uvicorn.error")
    service = sim_service()
    body = json.dumps({"model": "qwen3-tts-1.7b", "input": "Hello.", "response_format": "pcm"}).encode()
    try:
        with running_server(service) as url, socket.create_connection(
                ("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=20) as s:
            log.addHandler(records)  # once uvicorn has configured its logging
            s.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                      b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            data = b""
            try:
                while chunk := s.recv(65536):
                    data += chunk
            except ConnectionResetError:
                pass
    finally:
        log.removeHandler(records)
    assert data.startswith(b"HTTP/1.1 200") and not data.endswith(b"0\r\n\r\n"), data[-50:]
    said = [r for r in records.records if r.levelno >= logging.WARNING]
    assert len(said) == 1, [r.getMessage() for r in said]
    assert said[0].exc_info is None and "the codec replica went away" in said[0].getMessage()
    assert "\n" not in said[0].getMessage()
