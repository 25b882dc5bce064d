"""`POST /v1/audio/transcriptions`, OpenAI's convention: a model that hears (models/speechlm) answers a
clip with text.

multipart/form-data fields: `file` (the clip: WAV, FLAC or OGG, any rate), `model` (required, as OpenAI's
clients always send one; the served model answers whatever it names), `prompt` (optional: a system text
turn before the clip), `temperature` (0, OpenAI's default: greedy text), `response_format` (json | text
| verbose_json) and `stream` (true: server-sent events `transcript.text.delta` per decoded token, then
`transcript.text.done`). A bad upload (not a form,
no file, not audio, empty, too long, a rate out of range, too large) is a 4xx with one sentence.

The form is parsed with the standard library's MIME parser (no python-multipart dependency: the form is
small and read whole, after the guard middleware bounded it to MAX_UPLOAD_BYTES for this path).
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from email.parser import BytesParser
from email.policy import HTTP
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from voxcli.models.base import InputError
from voxcli.server.guard import APIError
from voxcli.server.metrics import ServerMetrics
from voxcli.server.routes import classify_failure
from voxcli.server.service import SpeechService

TRANSCRIPTIONS_PATH = "/v1/audio/transcriptions"
MAX_UPLOAD_BYTES = 25 * 1024 * 1024  # OpenAI's own upload limit
FORMATS = ("json", "text", "verbose_json")


def parse_form(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """multipart/form-data -> {field: (file name or None, bytes)}; APIError 400 when it is not one."""
    if not content_type.lower().startswith("multipart/form-data") or "boundary=" not in content_type:
        raise APIError(400, "send the clip as multipart/form-data with a file field (and model).", "file")
    msg = BytesParser(policy=HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body
    )
    if not msg.is_multipart():
        raise APIError(400, "the multipart/form-data body could not be parsed; send a file field.", "file")
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str) or name in fields:
            continue
        payload = part.get_payload(decode=True)
        fields[name] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return fields


def _text(fields: dict[str, tuple[str | None, bytes]], name: str) -> str | None:
    if name not in fields:
        return None
    try:
        return fields[name][1].decode("utf-8").strip()
    except UnicodeDecodeError:
        raise APIError(400, f"field {name} must be UTF-8 text.", name) from None


def _temperature(value: str | None) -> float:
    try:
        t = float(value) if value else 0.0
    except ValueError:
        t = -1.0
    if not 0 <= t <= 2:
        raise APIError(400, f"temperature must be a number from 0 to 2, got {value!r}.", "temperature")
    return t


def read_upload(data: bytes, name: str) -> tuple[Any, int]:
    """The uploaded clip -> (float32 [channels, n], rate), or APIError 400 naming what is wrong."""
    import soundfile as sf

    from voxcli.transcribe import check_samples

    if not data:
        raise APIError(400, "the uploaded file is empty; send a recording of speech.", "file")
    try:
        pcm, sr = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except (OSError, RuntimeError) as e:
        raise APIError(
            400, f"the uploaded file is not audio this server can read ({e}); send WAV, FLAC or OGG.", "file"
        ) from None
    try:
        return check_samples(pcm.T, int(sr), name or "file")
    except InputError as e:
        raise APIError(400, f"{e}.", "file") from None


def build_transcriptions_router(service: SpeechService, metrics: ServerMetrics) -> APIRouter:
    router = APIRouter()

    @router.post(TRANSCRIPTIONS_PATH)
    async def transcriptions(request: Request) -> Response:
        from voxcli.transcribe import CannotHear, hearing_check, request_for, tap_of

        fields = parse_form(request.headers.get("content-type", ""), await request.body())
        if "file" not in fields:
            raise APIError(400, "field file is required: the clip to transcribe.", "file")
        if not _text(fields, "model"):
            raise APIError(400, "field model is required.", "model")
        fmt = _text(fields, "response_format") or "json"
        if fmt not in FORMATS:
            raise APIError(
                400, f"response_format {fmt!r} is not one of {', '.join(FORMATS)}.", "response_format"
            )
        stream_flag = (_text(fields, "stream") or "false").lower()
        if stream_flag not in ("true", "false"):
            raise APIError(400, f"stream must be true or false, got {stream_flag!r}.", "stream")
        pcm, rate = read_upload(fields["file"][1], fields["file"][0] or "file")
        try:
            hearing_check(getattr(service.engine, "program", None), service.model_id)
        except CannotHear as e:
            raise APIError(400, f"{e}.", "model") from None
        temperature = _temperature(_text(fields, "temperature"))
        # OpenAI's default temperature for transcriptions is 0: greedy text; above 0 it overrides the
        # checkpoint's text temperature (its top-k stays)
        req = request_for(pcm, rate, prompt=_text(fields, "prompt"), greedy=temperature == 0)
        if temperature > 0:
            req.options["text_temperature"] = temperature
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[str] = asyncio.Queue()
        heard = tap_of(service.engine).follow(
            req, on_delta=lambda d: loop.call_soon_threadsafe(queue.put_nowait, d)
        )
        try:
            stream = await asyncio.to_thread(service.engine.submit, req)
        except Exception as e:  # noqa: BLE001 - InputError (400), refusals (503): one sentence each
            tap_of(service.engine).forget(req)
            raise classify_failure(e, service, metrics) from None
        duration = pcm.shape[-1] / rate

        async def finished() -> None:
            try:
                await asyncio.to_thread(stream.wait, None)
            finally:
                tap_of(service.engine).forget(req)

        if stream_flag == "true":
            return StreamingResponse(
                _events(queue, finished, heard, stream.cancel), media_type="text/event-stream"
            )
        try:
            await finished()
        except Exception as e:  # noqa: BLE001
            raise classify_failure(e, service, metrics) from None
        metrics.requests.labels(outcome="ok").inc()
        if fmt == "text":
            return PlainTextResponse(heard.text)
        if fmt == "verbose_json":
            return JSONResponse(
                {
                    "task": "transcribe",
                    "duration": round(duration, 3),
                    "text": heard.text,
                    "token_ids": heard.token_ids,
                }
            )
        return JSONResponse({"text": heard.text})

    return router


async def _events(queue: asyncio.Queue[str], finished: Any, heard: Any, cancel: Any) -> AsyncIterator[bytes]:
    """SSE: one transcript.text.delta per decoded token as it comes, then transcript.text.done."""
    done = asyncio.ensure_future(finished())
    try:
        while True:
            getter = asyncio.ensure_future(queue.get())
            await asyncio.wait({getter, done}, return_when=asyncio.FIRST_COMPLETED)
            if getter.done():
                yield _sse({"type": "transcript.text.delta", "delta": getter.result()})
                continue
            getter.cancel()
            break
        while not queue.empty():
            yield _sse({"type": "transcript.text.delta", "delta": queue.get_nowait()})
        error = done.exception()
        if error is not None:
            yield _sse({"type": "error", "error": {"message": str(error)}})
            return
        yield _sse({"type": "transcript.text.done", "text": heard.text})
    finally:
        if not done.done():  # the client left: the request stops too
            cancel()
            done.cancel()


def _sse(event: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(event, ensure_ascii=False)}\n\n".encode()
