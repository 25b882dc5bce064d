"""Who may call and how much: the API key, the body size limit, and the one-sentence JSON errors.

Errors use the OpenAI shape `{"error": {"message", "type", "param", "code"}}` so OpenAI clients show the
message. A user mistake is 400 (a bad value: out of range, NaN or infinite, or of the wrong type, such as a
bool or a string for a number), 401 (key), 404, 408 (body too slow), 413 (body too large) or 422 (a body
that is not a JSON object, a field missing or not of the endpoint); overload is 503 with Retry-After; 500 is
only for our own bugs.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

OPEN_PATHS = frozenset({"/health"})  # load balancers probe without credentials


# pydantic's error kinds that say the body's shape is wrong (422); any other kind is a known field holding a
# bad value (400), the same answer a value out of range gets, so a field's value is refused alike however
# it is bad (issue 34).
SHAPE_ERRORS = frozenset({"missing", "extra_forbidden", "json_invalid", "model_type",
                          "model_attributes_type"})


def field_error_status(kind: str, field: str) -> int:
    """The status for pydantic's first error of `kind` at `field` ("body" / "message": the HTTP body or
    the WebSocket message itself; "type": a WebSocket message of another kind than expected)."""
    return 422 if kind in SHAPE_ERRORS or field in ("body", "message", "type") else 400


def error_response(status: int, message: str, kind: str = "invalid_request_error", param: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    body = {"error": {"message": _printable(message), "type": kind,
                      "param": None if param is None else _printable(param), "code": status}}
    return JSONResponse(body, status_code=status, headers=headers)


def _printable(text: str) -> str:
    """What a message may quote of the user's input must still encode as UTF-8 (a lone surrogate does
    not): such characters are written as their escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


class APIError(Exception):
    """Raised by a route to answer with `error_response`."""

    def __init__(self, status: int, message: str, param: str | None = None,
                 kind: str = "invalid_request_error", headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.kind, self.headers = status, message, param, kind, headers
        self.counted = False  # already in the request metrics (the engine's outcome was counted)

    def response(self) -> JSONResponse:
        return error_response(self.status, self.message, self.kind, self.param, self.headers)


def check_api_key(request_headers: Any, api_key: str | None, path: str) -> str | None:
    """None when allowed; else the sentence to answer 401 with."""
    if not api_key or path in OPEN_PATHS:
        return None
    auth = request_headers.get("authorization") or ""
    scheme, _, token = auth.partition(" ")
    if scheme.lower() != "bearer" or not token:
        return "this server needs an API key: send the header Authorization: Bearer <key>."
    if not secrets.compare_digest(token.strip().encode(), api_key.encode()):
        return "the API key in Authorization: Bearer is not valid for this server."
    return None


class GuardMiddleware:
    """Pure ASGI (no buffering of responses, so streamed audio stays streamed): the API key on HTTP and
    WebSocket, then the request body, read whole before the app sees it (a speech body is a few KB of
    JSON): at most `max_body_bytes` however it is framed (Content-Length or chunked: 413), and complete
    within `body_timeout_s` of the headers (a stalled or trickled body: 408). The app then reads the
    body from memory, and `receive` after it is the real one (the disconnect watch)."""

    def __init__(self, app: ASGIApp, api_key: str | None, max_body_bytes: int,
                 body_timeout_s: float = 10.0, ws_paths: frozenset[str] = frozenset(),
                 on_refused: Callable[[int, str], None] | None = None,
                 path_limits: dict[str, int] | None = None) -> None:
        self.app, self.api_key, self.max_body = app, api_key, max_body_bytes
        self.path_limits = path_limits or {}  # a larger bound for an upload endpoint (a clip, not JSON)
        self.body_timeout_s = body_timeout_s
        self.ws_paths = ws_paths
        # told (status, path) of every body this guard refuses (413, 408): the request metrics count them,
        # as they count every other refused request
        self.on_refused = on_refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        path = scope.get("path", "")
        denied = check_api_key(headers, self.api_key, path)
        if denied is not None:
            if scope["type"] == "websocket":
                await _refuse_handshake(scope, send, 401, denied, 1008)
                return
            resp = error_response(401, denied, "authentication_error",
                                  headers={"WWW-Authenticate": "Bearer"})
            await resp(scope, receive, send)
            return
        if scope["type"] == "websocket":
            if path not in self.ws_paths:  # Starlette would refuse with a bare 403
                live = ", ".join(sorted(self.ws_paths))
                await _refuse_handshake(scope, send, 404, f"no WebSocket endpoint {path}; the live speech "
                                                          f"endpoint is {live}.", 1008)
                return
            await self.app(scope, receive, send)
            return
        limit = self.path_limits.get(path, self.max_body)
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await self._refuse(413, self._too_big(limit), scope, receive, send)
            return
        try:
            body, disconnected = await asyncio.wait_for(self._read_body(receive, limit), self.body_timeout_s)
        except TimeoutError:
            await self._refuse(408, f"the request body did not arrive within {self.body_timeout_s:g} s of "
                                    "its headers; send it at once.", scope, receive, send)
            return
        except _BodyTooLarge:
            await self._refuse(413, self._too_big(limit), scope, receive, send)
            return
        if disconnected:
            return  # the client left mid-body: nobody to answer
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _too_big(self, limit: int) -> str:
        if limit != self.max_body:
            return f"the upload is larger than this endpoint accepts ({limit} bytes); send a shorter clip."
        return (f"the request body is larger than this server accepts ({self.max_body} bytes); send less "
                "text per request (or raise --max-body-bytes).")

    async def _read_body(self, receive: Receive, limit: int) -> tuple[bytes, bool]:
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return b"", True
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > limit:
                raise _BodyTooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks), False

    async def _refuse(self, status: int, message: str, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer before the body is read, and close the connection: the rest of the body is unread."""
        if self.on_refused is not None:
            self.on_refused(status, scope.get("path", ""))
        await error_response(status, message, headers={"Connection": "close"})(scope, receive, send)


async def _refuse_handshake(scope: Scope, send: Send, status: int, message: str, close_code: int) -> None:
    """A WebSocket handshake refused with the JSON error as an HTTP response where the server can send
    one (the ASGI websocket.http.response extension; uvicorn has it), else a close with the reason."""
    if "websocket.http.response" in scope.get("extensions", {}):
        body = error_response(status, message, "authentication_error" if status == 401 else
                              "invalid_request_error").body
        await send({"type": "websocket.http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "websocket.http.response.body", "body": body})
        return
    await send({"type": "websocket.close", "code": close_code, "reason": message[:120]})


class _BodyTooLarge(Exception):
    pass


async def api_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, APIError)
    return exc.response()
