"""Who may call and how much: the API key, the body size limit, and the one-sentence JSON errors.

Errors use the OpenAI shape `{"error": {"message", "type", "param", "code"}}` so OpenAI clients show the
message. A user mistake is 400 (bad value), 401 (key), 404, 413 (body too large) or 422 (a field of the
wrong type or missing); overload is 503 with Retry-After; 500 is only for our own bugs.
"""

from __future__ import annotations

import secrets
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

OPEN_PATHS = frozenset({"/health"})  # load balancers probe without credentials


def error_response(status: int, message: str, kind: str = "invalid_request_error", param: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    body = {"error": {"message": message, "type": kind, "param": param, "code": status}}
    return JSONResponse(body, status_code=status, headers=headers)


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
    """Pure ASGI (no buffering, so streamed responses stay streamed): API key on HTTP and WebSocket,
    and a cap on request body bytes, by Content-Length up front and by counting as the body arrives."""

    def __init__(self, app: ASGIApp, api_key: str | None, max_body_bytes: int) -> None:
        self.app, self.api_key, self.max_body = app, api_key, max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        denied = check_api_key(headers, self.api_key, scope.get("path", ""))
        if denied is not None:
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008, "reason": denied[:120]})
                return
            resp = error_response(401, denied, "authentication_error",
                                  headers={"WWW-Authenticate": "Bearer"})
            await resp(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await self.app(scope, receive, send)
            return
        too_big = (f"the request body is larger than this server accepts ({self.max_body} bytes); send "
                   f"less text per request (or raise --max-body-bytes).")
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            await error_response(413, too_big)(scope, receive, send)
            return
        seen = 0

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    raise APIError(413, too_big)
            return message

        await self.app(scope, limited_receive, send)


async def api_error_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, APIError)
    return exc.response()
