"""Text streaming in: WebSocket `/v1/audio/speech/live`.

    client -> {"type": "start", "voice": ..., "language": ..., "response_format": "pcm"|"wav", ...}
    client -> {"type": "text", "text": "Hel"}  ...  (or plain text frames)   as the LLM produces them
    client -> {"type": "end"}                                                  no more text
    server -> binary frames: the audio (a WAV header first for wav), as it is generated
    server -> {"type": "sentence", "index": i, "text": ...}   a sentence was complete and is being spoken
    server -> {"type": "done", "audio_seconds": ..., "sentences": n} | {"type": "error", "code", "message"}

Each sentence is spoken as soon as it is complete (see voxcli.textstream), while more text arrives.
A client that goes away cancels everything it started.
"""

from __future__ import annotations

import asyncio
import json
import queue
from typing import Any, Literal

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from voxcli.models.base import SynthesisRequest
from voxcli.server import encoding
from voxcli.server.guard import APIError
from voxcli.server.metrics import PlaybackClock, ServerMetrics
from voxcli.server.routes import classify_failure, stopped, template_from
from voxcli.server.service import Item, SpeechJob, SpeechService
from voxcli.speak import Stopped
from voxcli.textstream import SentenceBuffer, speak_live


class LiveStart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["start"] = "start"
    model: str | None = None
    voice: str | None = None
    language: str | None = None
    instructions: str | None = None
    response_format: Literal["pcm", "wav"] = "pcm"
    seed: int | None = None
    greedy: bool = False
    temperature: float | None = Field(default=None, gt=0)
    top_k: int | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_frames: int | None = Field(default=None, ge=1)
    cfg_scale: float | None = None
    options: dict[str, Any] | None = None


def build_live_router(service: SpeechService, metrics: ServerMetrics) -> APIRouter:
    router = APIRouter()
    sr = service.spec.sample_rate

    @router.websocket("/v1/audio/speech/live")
    async def live(ws: WebSocket) -> None:
        await ws.accept()
        try:
            start = LiveStart.model_validate_json(await ws.receive_text())
            if start.model not in (None, service.model_id):
                raise APIError(400, f"model {start.model!r} is not served here; use {service.model_id!r}.")
            template = template_from(start, service)
        except WebSocketDisconnect:
            return
        except ValidationError as e:
            err = e.errors()[0]
            field = ".".join(str(x) for x in err.get("loc", ())) or "message"
            await _close_with(ws, 422, f"the first message must be a start object; field {field}: "
                                       f"{err.get('msg', 'invalid')}.")
            return
        except APIError as e:
            await _close_with(ws, e.status, e.message)
            return

        text_in: queue.Queue[str | None] = queue.Queue()
        buffer = SentenceBuffer()
        cap = service.session.frame_cap
        job = service.job(asyncio.get_running_loop())
        sentences = 0

        def make(sentence: str) -> SynthesisRequest:
            nonlocal sentences
            req = template.request(sentence)
            if req.max_frames is None and cap is not None:
                req.max_frames = cap(sentence)
            job.put(Item("sentence", text=sentence))
            sentences += 1
            return req

        def requests() -> Any:  # runs on the job's text-in thread; blocks for the next fragment
            for fragment in iter(text_in.get, None):
                for s in buffer.feed(fragment):
                    yield make(s)
            for s in buffer.finish():
                yield make(s)

        job.start(requests(), runner=speak_live)
        receiver = asyncio.create_task(_receive_text(ws, job, text_in, service.limits.max_ws_chars))
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
                    await ws.send_json({"type": "done", "sentences": sentences,
                                        "audio_seconds": round(clock.audio_s if clock else 0.0, 4)})
                    await ws.close()
                    return
                else:
                    error = item.error
                    if stopped(error):
                        return  # the client left
                    if isinstance(error, APIError):
                        await _close_with(ws, error.status, error.message)
                        return
                    outcome = "failed"
                    err = classify_failure(error or RuntimeError("unknown"), service, metrics)
                    await _close_with(ws, err.status, err.message, err.headers)
                    return
        except WebSocketDisconnect:
            return
        finally:
            receiver.cancel()
            job.cancel()
            text_in.put(None)
            if outcome != "failed":
                metrics.requests.labels(outcome=outcome).inc()
            if clock is not None:
                metrics.audio.inc(clock.audio_s)

    return router


async def _receive_text(ws: WebSocket, job: SpeechJob, text_in: queue.Queue[str | None],
                        max_chars: int) -> None:
    """Fragments from the client into the sentence buffer's queue, until `end`, a limit, or a disconnect."""
    chars = 0
    try:
        while True:
            fragment, end = _parse_fragment(await ws.receive_text())
            if fragment:
                chars += len(fragment)
                if chars > max_chars:
                    job.put(Item("error", error=APIError(413, f"this session streamed more than {max_chars} "
                                                              "characters; start a new one.")))
                    job.cancel()  # after the put: the client hears why before the job's own "stopped"
                    return
                text_in.put(fragment)
            if end:
                text_in.put(None)
                return
    except WebSocketDisconnect:
        job.cancel()
        text_in.put(None)
        job.put(Item("error", error=Stopped()))


def _parse_fragment(message: str) -> tuple[str, bool]:
    """A text frame: JSON {"type": "text", "text"} / {"type": "end"}, or plain text."""
    if message.startswith("{"):
        try:
            obj = json.loads(message)
        except json.JSONDecodeError:
            return message, False
        if isinstance(obj, dict) and obj.get("type") == "end":
            return str(obj.get("text", "")), True
        if isinstance(obj, dict) and obj.get("type") == "text":
            return str(obj.get("text", "")), False
    return message, False


async def _close_with(ws: WebSocket, status: int, message: str,
                      headers: dict[str, str] | None = None) -> None:
    body: dict[str, Any] = {"type": "error", "code": status, "message": message}
    if headers and "Retry-After" in headers:
        body["retry_after"] = int(headers["Retry-After"])
    try:
        await ws.send_json(body)
        await ws.close(code=1013 if status == 503 else 1008 if status in (401, 403) else 1003 if status < 500
                       else 1011)
    except (WebSocketDisconnect, RuntimeError):
        pass
