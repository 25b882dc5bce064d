"""Text streaming in: WebSocket `/v1/audio/speech/live`.

    client -> {"type": "start", "voice": ..., "language": ..., "response_format": "pcm"|"wav", ...}
    client -> {"type": "text", "text": "Hel"}  ...  (or plain text frames)   as the LLM produces them
    client -> {"type": "end"}                                                  no more text
    server -> binary frames: the audio (a WAV header first for wav), as it is generated
    server -> {"type": "sentence", "index": i, "text": ...}   a sentence was complete and is being spoken
    server -> {"type": "done", "audio_seconds": ..., "sentences": n} | {"type": "error", "code", "message"}

Each sentence is spoken as soon as it is complete (see voxcli.textstream), while more text arrives. A
model that reads text as it arrives (`ModelSpec.streams_text`, Kyutai) gets the whole session as ONE
request instead, its words fed to it as they arrive (no `sentence` messages; `done` counts 1).
A client that goes away cancels everything it started.

Every frame in every state is answered: a frame the protocol does not allow (binary, a JSON object of
another type, text after `end`, a start that does not validate) gets an `error` message naming it and
a close with a reason; a client silent for too long (`Limits.ws_start_timeout_s` for the start,
`ws_idle_timeout_s` between text frames) is closed the same way. Whatever the ending, the job, its
threads, pages and slot end with the socket (the `finally` below is the one exit).
"""

from __future__ import annotations

import asyncio
import json
import queue
from typing import Any, Literal

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from voxcli.audio import STREAMABLE
from voxcli.server import encoding
from voxcli.server.guard import APIError, field_error_status
from voxcli.server.metrics import PlaybackClock, ServerMetrics
from voxcli.server.routes import (
    OPENAI_MODEL_ALIASES,
    check_text_fields,
    classify_failure,
    stopped,
    template_from,
)
from voxcli.server.service import Item, SpeechJob, SpeechService
from voxcli.speak import Stopped
from voxcli.speak_choice import SpeakOptions
from voxcli.text import TextInputError, check_real_text


class LiveStart(BaseModel):
    # strict: a number field takes a number (not true, not "1"), a whole one not 1.0 (issue 34)
    model_config = ConfigDict(extra="forbid", strict=True)

    type: Literal["start"] = "start"
    model: str | None = None
    voice: str | None = None
    language: str | None = None
    instructions: str | None = None
    response_format: str = "pcm"  # a streamable format of voxcli.audio.FORMATS
    seed: int | None = None
    greedy: bool = False
    temperature: float | None = Field(default=None, gt=0)
    top_k: int | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_frames: int | None = Field(default=None, ge=1)
    cfg_scale: float | None = None
    options: dict[str, Any] | None = None

    @field_validator("response_format")
    @classmethod
    def _streamable(cls, value: str) -> str:
        if value not in STREAMABLE:
            raise ValueError(f"Input should be {' or '.join(repr(f) for f in STREAMABLE)}")
        return value


LIVE_PATH = "/v1/audio/speech/live"


class Violation(Exception):
    """A frame the session's state does not allow: answered with an error message and a close."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def build_live_router(service: SpeechService, metrics: ServerMetrics) -> APIRouter:
    router = APIRouter()
    sr = service.spec.sample_rate
    limits = service.limits

    @router.websocket(LIVE_PATH)
    async def live(ws: WebSocket) -> None:
        await ws.accept()
        try:
            start = await _start_message(ws, limits.ws_start_timeout_s)
            if start is None:
                return  # the client left before starting
            if start.model not in (None, service.model_id, *OPENAI_MODEL_ALIASES):  # as HTTP accepts
                raise APIError(400, f"model {start.model!r} is not served here; use {service.model_id!r} (or "
                                    f"one of the OpenAI names {', '.join(OPENAI_MODEL_ALIASES)}).")
            check_text_fields(start)
            template = template_from(start, service)
        except Violation as e:
            metrics.requests.labels(outcome="invalid").inc()
            await _close_with(ws, e.status, e.message)
            return
        except APIError as e:
            metrics.requests.labels(outcome="invalid").inc()
            await _close_with(ws, e.status, e.message)
            return

        text_in: queue.Queue[str | None] = queue.Queue()
        job = service.job(asyncio.get_running_loop())
        # each sentence as it is spoken (a `sentence` message); the route's own idle timeout answers a
        # silent client first, a fed text's limit is the backstop
        options = SpeakOptions(on_sentence=lambda s: job.put(Item("sentence", text=s)),
                               idle_limit_s=2 * limits.ws_idle_timeout_s)
        job.speak(iter(text_in.get, None), template, options)  # the text arrives on the job's thread
        receiver = asyncio.create_task(_receive_text(ws, job, text_in, limits.max_ws_chars,
                                                     limits.ws_idle_timeout_s))
        clock: PlaybackClock | None = None
        outcome = "cancelled"
        index = 0
        try:
            while True:
                item = await job.next()
                if item.kind == "sentence":
                    await ws.send_json({"type": "sentence", "index": index, "text": item.text})
                    index += 1
                elif item.kind == "audio":
                    data = encoding.pcm_bytes(item.pcm)  # type: ignore[arg-type]
                    if clock is None:
                        clock = PlaybackClock(sr)
                        data = encoding.stream_prefix(start.response_format, sr) + data
                    clock.chunk(item.pcm.size, item.t)  # type: ignore[union-attr]
                    await ws.send_bytes(data)
                elif item.kind == "end":
                    outcome = "done"
                    spoken = item.stats.segments if item.stats is not None else 0
                    await ws.send_json({"type": "done", "sentences": spoken,
                                        "audio_seconds": round(clock.audio_s if clock else 0.0, 4)})
                    await ws.close()
                    return
                else:
                    error = item.error
                    if stopped(error):
                        return  # the client left
                    if isinstance(error, Violation | APIError):
                        outcome = "invalid"
                        await _close_with(ws, error.status, error.message)
                        return
                    outcome = "failed"
                    err = classify_failure(error or RuntimeError("unknown"), service, metrics)
                    await _close_with(ws, err.status, err.message, err.headers)
                    return
        except (WebSocketDisconnect, RuntimeError, OSError):
            return  # the client went away while we were sending
        finally:
            receiver.cancel()
            job.cancel()
            text_in.put(None)  # the text-in thread's blocking read ends
            if outcome != "failed":
                metrics.requests.labels(outcome=outcome).inc()
            if clock is not None:
                metrics.audio.inc(clock.audio_s)

    return router


async def _start_message(ws: WebSocket, timeout_s: float) -> LiveStart | None:
    """The first frame, as a start object; None when the client left first."""
    try:
        message = await asyncio.wait_for(ws.receive(), timeout_s)
    except TimeoutError:
        raise Violation(408, f"no start message within {timeout_s:g} s; send {{\"type\": \"start\"}} "
                             "first.") from None
    if message["type"] == "websocket.disconnect":
        return None
    text = message.get("text")
    if text is None:
        raise Violation(400, "the first message must be a JSON start object in a text frame, not a binary "
                             "frame.")
    try:
        obj = json.loads(text)  # the stdlib parser, as FastAPI's for HTTP bodies: same text, same answer
    except json.JSONDecodeError as e:
        raise Violation(422, f"the first message must be a JSON start object; it is not JSON ({e.msg} at "
                             f"column {e.colno}).") from None
    try:
        return LiveStart.model_validate(obj)
    except ValidationError as e:
        err = e.errors()[0]
        field = ".".join(str(x) for x in err.get("loc", ())) or "message"
        raise Violation(field_error_status(err.get("type", ""), field),
                        f"the first message must be a start object; field {field}: "
                             f"{err.get('msg', 'invalid')}.") from None


async def _receive_text(ws: WebSocket, job: SpeechJob, text_in: queue.Queue[str | None],
                        max_chars: int, idle_timeout_s: float) -> None:
    """Fragments from the client into the sentence buffer's queue until `end`; then any further frame
    is a violation. Whatever happens here reaches the job (an error item, or Stopped for a client that
    left): this task never ends silently while the job waits for text."""
    chars = 0
    ended = False
    try:
        while True:
            try:
                message = await (ws.receive() if ended else asyncio.wait_for(ws.receive(), idle_timeout_s))
            except TimeoutError:
                raise Violation(408, f"no text for {idle_timeout_s:g} s; send text frames, or "
                                     "{\"type\": \"end\"} to finish.") from None
            if message["type"] == "websocket.disconnect":
                raise WebSocketDisconnect(message.get("code", 1000))
            if ended:
                raise Violation(400, "the text already ended with {\"type\": \"end\"}; start a new "
                                     "session for more.")
            fragment, end = parse_fragment(message)
            if fragment:
                chars += len(fragment)
                if chars > max_chars:
                    raise Violation(413, f"this session streamed more than {max_chars} characters; start a "
                                         "new one.")
                text_in.put(fragment)
            if end:
                text_in.put(None)
                ended = True
    except WebSocketDisconnect:
        job.cancel()
        text_in.put(None)
        job.put(Item("error", error=Stopped()))
    except Violation as e:
        job.put(Item("error", error=e))
        job.cancel()  # after the put: the client hears why before the job's own "stopped"
        text_in.put(None)
    except asyncio.CancelledError:
        raise
    except Exception as e:  # noqa: BLE001 - our bug: still end the job rather than leak it
        job.put(Item("error", error=e))
        job.cancel()
        text_in.put(None)


def parse_fragment(message: dict[str, Any]) -> tuple[str, bool]:
    """A frame while text streams in: JSON {"type": "text", "text"} / {"type": "end"}, or plain text.
    Anything else raises Violation."""
    text = message.get("text")
    if text is None:
        raise Violation(400, "binary frames carry no text; send text frames (plain text or "
                             "{\"type\": \"text\", \"text\": ...}).")
    fragment, end = text, False
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            obj = None  # plain text that happens to start with a brace
        if isinstance(obj, dict):
            kind = obj.get("type")
            if kind not in ("text", "end"):
                raise Violation(400, f"a message of type {json.dumps(kind)} is not allowed while text "
                                     "streams in; send {\"type\": \"text\", \"text\": ...} or "
                                     "{\"type\": \"end\"}.")
            value = obj.get("text", "")
            if not isinstance(value, str):
                raise Violation(400, f"field text must be a string, got {type(value).__name__}.")
            fragment, end = value, kind == "end"
    try:
        check_real_text(fragment, "field text")
    except TextInputError as e:
        raise Violation(400, str(e)) from None
    return fragment, end


async def _close_with(ws: WebSocket, status: int, message: str,
                      headers: dict[str, str] | None = None) -> None:
    body: dict[str, Any] = {"type": "error", "code": status, "message": message}
    if headers and "Retry-After" in headers:
        body["retry_after"] = int(headers["Retry-After"])
    code = 1013 if status == 503 else 1008 if status in (401, 403, 408) else 1009 if status == 413 \
        else 1003 if status < 500 else 1011
    try:
        await ws.send_json(body)
        await ws.close(code=code, reason=_reason(message))
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass


def _reason(message: str) -> str:
    """A close reason fits in 123 bytes of UTF-8 (RFC 6455); cut on a character boundary."""
    data = message.encode("utf-8")[:120]
    return data.decode("utf-8", errors="ignore")
