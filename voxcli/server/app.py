"""The ASGI app: routes, the WebSocket text-in endpoint, the guard, one-sentence errors.

    app = create_app(SpeechService(session), api_key=None)
    uvicorn.run(app, host="127.0.0.1", port=8000)

On shutdown the service (its engine) is closed, waited for at most `voxcli.stopping.STOP_BOUND_S`;
`app.state.close_stuck` says it did not finish.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from voxcli import __version__
from voxcli.server.guard import (
    APIError,
    GuardMiddleware,
    api_error_handler,
    error_response,
    field_error_status,
)
from voxcli.server.live import LIVE_PATH, build_live_router
from voxcli.server.metrics import ServerMetrics
from voxcli.server.routes import SPEECH_PATH, build_router
from voxcli.server.service import SpeechService
from voxcli.server.transcriptions import MAX_UPLOAD_BYTES, TRANSCRIPTIONS_PATH, build_transcriptions_router
from voxcli.stopping import close_within


def create_app(service: SpeechService, api_key: str | None = None, close_on_shutdown: bool = True) -> FastAPI:
    metrics = ServerMetrics(service)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        app.state.close_stuck = False
        yield
        if close_on_shutdown and not close_within(service.close):
            # an engine that cannot stop (a request stuck on its thread) must not hold the shutdown:
            # `vox serve` then leaves at once (voxcli.stopping)
            app.state.close_stuck = True

    app = FastAPI(title="vox serve", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.service = service
    app.state.metrics = metrics
    app.include_router(build_router(service, metrics))
    app.include_router(build_live_router(service, metrics))
    app.include_router(build_transcriptions_router(service, metrics))  # audio in (transcriptions.py)
    async def on_api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, APIError)
        if 400 <= exc.status < 500 and not exc.counted:
            metrics.requests.labels(outcome="invalid").inc()
        return await api_error_handler(request, exc)

    async def on_validation_error(request: Request, exc: Exception) -> JSONResponse:
        metrics.requests.labels(outcome="invalid").inc()
        return await _validation_error(request, exc)

    app.add_exception_handler(APIError, on_api_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    def on_refused(status: int, path: str) -> None:  # a body too large (413) or too slow (408)
        if path == SPEECH_PATH:
            metrics.requests.labels(outcome="invalid").inc()

    app.add_middleware(GuardMiddleware, api_key=api_key, max_body_bytes=service.limits.max_body_bytes,
                       body_timeout_s=service.limits.body_timeout_s, ws_paths=frozenset({LIVE_PATH}),
                       on_refused=on_refused, path_limits={TRANSCRIPTIONS_PATH: MAX_UPLOAD_BYTES})
    return app


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's list of pydantic errors -> one sentence naming the first field and what it accepts."""
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    if not errors:
        return error_response(422, "the request body is not valid JSON for this endpoint.")
    e = errors[0]
    loc = [str(x) for x in e.get("loc", ()) if x != "body"]
    field = ".".join(loc) or "body"
    kind = e.get("type", "")
    if kind == "missing":
        message = f"field {field} is required."
    elif kind == "extra_forbidden":
        message = (f"field {field} is not a field of this endpoint (see docs/serving.md for the "
                   "accepted fields).")
    elif kind == "json_invalid":
        message = "the request body is not valid JSON."
        field = "body"
    elif field == "body":
        message = "the request body must be a JSON object sent with Content-Type: application/json."
    else:
        message = f"field {field}: {e.get('msg', 'invalid value')}."
    more = f" ({len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})" if len(errors) > 1 else ""
    return error_response(field_error_status(kind, field), message + more, param=field)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    # a long path is quoted in part: the answer stays small
    path = request.url.path if len(request.url.path) <= 200 else request.url.path[:200] + "..."
    message = {404: f"no such endpoint {path}; see GET /v1/models, POST /v1/audio/speech.",
               405: f"method {request.method} is not allowed on {path}."}.get(
        exc.status_code, str(exc.detail))
    if exc.status_code == 400 and message == "There was an error parsing the body":  # FastAPI's words
        message = ("the request body could not be read as JSON (it is not UTF-8, or nested too deeply); "
                   "send one JSON object in UTF-8.")
    return error_response(exc.status_code, message, headers=getattr(exc, "headers", None))
