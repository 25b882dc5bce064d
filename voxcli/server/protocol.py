"""The HTTP connection under the app: uvicorn's h11 protocol with the limits it lacks, and the one
place that builds the uvicorn config (`vox serve` and the tests serve the same way).

uvicorn closes an idle kept-alive connection (`timeout_keep_alive`) but has no bound on how long a
client may take to send its request headers: a slowloris client (a byte every few seconds) holds its
connection forever. `GuardedH11Protocol` closes a connection whose request headers are not complete
within `header_timeout_s` of the connection opening (or of its previous response ending), with a 408
JSON error. The body's own bound is the app's (`guard.GuardMiddleware`, `body_timeout_s`): together a
request that is not fully received within header_timeout_s + body_timeout_s is dropped.

uvicorn answers a request h11 cannot parse with a plain-text 400; here it is the API's JSON error
shape (431 for headers over the size limit, 414 for a request line over its own, checked on the
buffered bytes before h11 parses them: `voxcli.server.header_bounds`). The connection's transport is
handed to the app in `scope["extensions"]["vox.transport"]`, so a streamed response can tell a client
that read all of it from one that stopped reading (`voxcli.server.delivery`). A WebSocket text frame
that is not UTF-8 is closed with 1007 and a reason saying so; a message over the size limit gets an
`error` message before its close 1009.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from voxcli.server.header_bounds import MAX_HEADER_BYTES, head_problem

TRANSPORT_KEY = "vox.transport"
# how long a refused request's connection still reads (and drops) its bytes before it is closed
REFUSED_GRACE_S = 2.0


def _raw_response(status: int, reason: str, message: str) -> bytes:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error", "param": None,
                                 "code": status}}).encode()
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\nconnection: close\r\n"
            f"content-length: {len(body)}\r\n\r\n")
    return head.encode("ascii") + body


class GuardedH11Protocol(H11Protocol):
    header_timeout_s = 10.0  # set per server by `server_config` (a subclass per config)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._header_timer: asyncio.TimerHandle | None = None
        self._refused = False  # a refused head was answered: drop what else arrives until the close

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        if self.conn.their_state is h11.IDLE:  # the next request's head: bounded before h11 parses it
            problem = head_problem(self.conn.trailing_data[0])
            if problem is not None:
                self._refuse_head(*problem)
                return
        cycle = self.cycle
        super().handle_events()
        if self.conn.their_state is not h11.IDLE:  # the request's headers are in (or it failed)
            self._disarm_header_timer()
        if self.cycle is not cycle and self.scope is not None:
            # the new request's task is created but has not run yet: its scope is this dict
            self.scope.setdefault("extensions", {})[TRANSPORT_KEY] = self.transport  # type: ignore[typeddict-unknown-key]

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._arm_header_timer()  # the next request on this connection gets the same bound

    def send_400_response(self, msg: str) -> None:
        """Called inside uvicorn's `except h11.RemoteProtocolError`: the error is the one in flight."""
        self._disarm_header_timer()
        exc = sys.exc_info()[1]
        status = getattr(exc, "error_status_hint", 400) if isinstance(exc, h11.RemoteProtocolError) else 400
        if status == 431:
            message = (f"the request line and headers are larger than this server accepts "
                       f"({MAX_HEADER_BYTES} bytes); send fewer or shorter headers.")
            reason = "Request Header Fields Too Large"
        else:
            detail = str(exc) if exc is not None else "malformed request"
            message = f"the request is not valid HTTP/1.1 ({detail}); check the client."
            status, reason = 400, "Bad Request"
        self._refuse_head(status, reason, message)

    def _refuse_head(self, status: int, reason: str, message: str) -> None:
        """Answer a request whose head is refused and end the connection. Closing with the client's
        bytes still unread would send a reset that can overtake the answer (a 64 KB head arrives in
        several reads), so: answer, shut our side, drop whatever else comes, close after a grace."""
        self._disarm_header_timer()
        if self.transport.is_closing() or self._refused:
            return
        self._refused = True
        self.transport.write(_raw_response(status, reason, message))
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.flow.resume_reading()
            self.loop.call_later(REFUSED_GRACE_S, self.transport.close)
        else:
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self._refused:  # answered already: the rest of the request is read and dropped
            return
        super().data_received(data)

    def _arm_header_timer(self) -> None:
        self._disarm_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        self._unset_keepalive_if_required()
        if self.conn.trailing_data[0]:  # it started a request and did not finish its headers: say why
            message = (f"the request headers did not arrive within {self.header_timeout_s:g} s of the "
                       "connection; send the whole request at once.")
            self.transport.write(_raw_response(408, "Request Timeout", message))
        self.transport.close()


def _server_text_frame(payload: bytes) -> bytes:
    """One unmasked, uncompressed text frame (RFC 6455 5.2; valid with permessage-deflate too)."""
    n = len(payload)
    if n < 126:
        head = bytes([0x81, n])
    elif n < 1 << 16:
        head = bytes([0x81, 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([0x81, 127]) + n.to_bytes(8, "big")
    return head + payload


def _ws_protocol() -> type | None:
    """uvicorn's websockets (sans-I/O) protocol, closing a text frame that is not UTF-8 with 1007 and a
    reason that says so (uvicorn closes with no reason and logs a traceback for it)."""
    try:
        from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
    except ImportError:  # no websockets library: uvicorn's own choice
        return None

    from websockets.exceptions import PayloadTooBig

    class GuardedWSProtocol(WebSocketsSansIOProtocol):
        def data_received(self, data: bytes) -> None:
            """uvicorn's, plus an `error` message before the close 1009 of a frame over the size limit
            (the websockets parser closes with no message the client's app would show)."""
            self.conn.receive_data(data)
            exc = self.conn.parser_exc
            if exc is None:
                self.handle_events()
                return
            if isinstance(exc, PayloadTooBig) and not self.close_sent and not self.transport.is_closing():
                limit = self.config.ws_max_size
                message = (f"a WebSocket message is larger than this server accepts ({limit} bytes); send "
                           "the text in smaller frames.")
                body = json.dumps({"type": "error", "code": 413, "message": message}).encode()
                self.transport.write(_server_text_frame(body))
            self.handle_parser_exception()

        def send_receive_event_to_app(self) -> None:
            if self.curr_msg_data_type == "text" and not self.close_sent:
                data = self.frames[0] if len(self.frames) == 1 else b"".join(self.frames)
                try:
                    data.decode()
                except UnicodeDecodeError as e:
                    self.frames = []
                    reason = f"a text frame is not UTF-8 (byte 0x{data[e.start]:02x} at offset {e.start})."
                    self.conn.send_close(1007, reason)
                    self.handle_parser_exception()
                    return
            super().send_receive_event_to_app()

    return GuardedWSProtocol


def protocol_class(header_timeout_s: float) -> type[GuardedH11Protocol]:
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"header_timeout_s": header_timeout_s})


def server_config(app: Any, host: str, port: int, limits: Any, log_level: str = "info",
                  timeout_graceful_shutdown: int | None = 5) -> Any:
    """The uvicorn config of a `vox serve` app: the guarded h11 protocol, the idle bound, and a
    WebSocket frame size in line with the body limit (a session's text comes in many small frames)."""
    import uvicorn

    ws: Any = _ws_protocol() or "auto"
    return uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on",
                          http=protocol_class(limits.header_timeout_s), ws=ws,
                          timeout_keep_alive=max(1, round(limits.idle_timeout_s)),
                          h11_max_incomplete_event_size=MAX_HEADER_BYTES,
                          ws_max_size=max(limits.max_body_bytes, 64 * 1024),
                          timeout_graceful_shutdown=timeout_graceful_shutdown)
