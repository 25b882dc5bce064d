"""The HTTP routes: POST /v1/audio/speech (OpenAI fields + extensions), GET /v1/audio/voices,
/v1/models, /health, /metrics.

The response starts when the first audio chunk exists (headers and first bytes at TTFA), so a refusal
by the engine's admission can still be a 503 with Retry-After rather than a broken 200.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Literal
from urllib.parse import quote

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from voxcli.audio import FORMATS, STREAMABLE
from voxcli.engine.stream import EngineClosed, RequestFailed, RequestRejected
from voxcli.models.base import InputError, SamplingParams
from voxcli.server import encoding
from voxcli.server.delivery import Delivery
from voxcli.server.guard import APIError
from voxcli.server.metrics import CONTENT_TYPE, PlaybackClock, ServerMetrics
from voxcli.server.protocol import TRANSPORT_KEY
from voxcli.server.service import Item, SpeechJob, SpeechService
from voxcli.server.streaming_choice import client_streams
from voxcli.server.voices import map_voice, table_for
from voxcli.speak import RequestTemplate, SpeechFailed, Stopped
from voxcli.speak_choice import SpeakOptions
from voxcli.text import TextInputError, check_real_text, check_speakable
from voxcli.text_phase import TextLog, no_text_phase

# OpenAI's model names, accepted for the one model this server runs (clients often hard-code them).
OPENAI_MODEL_ALIASES = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")


SPEECH_PATH = "/v1/audio/speech"

class SpeechBody(BaseModel):
    """POST /v1/audio/speech. OpenAI's fields, then our extensions."""

    # strict: a number field takes a number (not true, not "1"), a whole one not 1.0 (issue 34)
    model_config = ConfigDict(extra="forbid", strict=True)

    model: str
    input: str
    voice: str | None = None
    response_format: str = "wav"
    speed: float = 1.0
    stream_format: Literal["audio", "sse"] = "audio"
    instructions: str | None = None
    # extensions
    stream: bool | None = None  # false: one whole file with its real length (streaming_choice.py)
    language: str | None = None
    seed: int | None = None
    cfg_scale: float | None = None
    greedy: bool = False
    temperature: float | None = Field(default=None, gt=0)
    top_k: int | None = Field(default=None, ge=0)  # 0 = no top-k filter
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_frames: int | None = Field(default=None, ge=1)
    options: dict[str, Any] | None = None  # the model family's own options (SynthesisRequest.options)
    fixed_frames: int | None = Field(default=None, ge=1)  # benchmarks on random weights / the sim
    show_text: bool = False  # a unified text+audio model's text phase: header X-Vox-Text (+ sse events)


def template_from(body: Any, service: SpeechService) -> RequestTemplate:
    """The request template of a speech body (HTTP or WebSocket), checked by the model's own cheap
    `check` (voice, language, cfg_scale, options) before any synthesis."""
    sampling = SamplingParams(greedy=body.greedy, temperature=body.temperature, top_k=body.top_k,
                              top_p=body.top_p)
    voice = map_voice(body.voice, table_for(service), service.spec.voices)  # OpenAI names (voices.py)
    template = RequestTemplate(voice=voice, language=body.language, instructions=body.instructions,
                               seed=body.seed, sampling=sampling, max_frames=body.max_frames,
                               cfg_scale=getattr(body, "cfg_scale", None), options=body.options,
                               voice_paths=False)  # from the network a voice is a name, never a file
    try:
        service.check(template.request("(flags check)"))
    except InputError as e:
        message = str(e)
        raise APIError(400, _sentence(_no_cli_flags(message)), param_of(message, type(body))) from None
    return template


def param_of(message: str, body_type: Any) -> str | None:
    """The body field a model's sentence is about (named as the field, `--flag` or a word of it: "the
    instructions are empty", "max_frames must be..."), the one named first; None when it names none."""
    fields = [f for f in getattr(body_type, "model_fields", {}) if f not in ("input", "model")]
    found: list[tuple[int, str]] = []
    for name in fields:
        forms = {name, name.replace("_", " "), "--" + name.replace("_", "-"), name.rstrip("s")}
        for form in forms:
            m = re.search(rf"(?<![\w-]){re.escape(form)}(?![\w-])", message)
            if m is not None:
                found.append((m.start(), name))
    return min(found)[1] if found else None


def check_text_fields(body: Any) -> None:
    """Every string of a speech body (input, voice, instructions, options...) must be real text: a lone
    surrogate escape ("\\ud800") is valid JSON but no tokenizer takes it. 400 naming the field."""
    for name, value in _strings(body.model_dump()):
        try:
            if name == "input":
                check_speakable(value, f"field {name}")
            else:
                check_real_text(value, f"field {name}")
        except TextInputError as e:
            raise APIError(400, str(e), name) from None


def _strings(value: Any, name: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield name, value
    elif isinstance(value, dict):
        for k, v in value.items():
            key = f"{name}.{k}" if name else str(k)
            yield from _strings(str(k), key)
            yield from _strings(v, key)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _strings(v, f"{name}[{i}]")


def _sentence(message: str) -> str:
    return message if message.endswith((".", "!", "?")) else message + "."


def _no_cli_flags(message: str) -> str:
    """The model's message speaks to the CLI; over HTTP, point at the API instead."""
    message = re.sub(r"drop (--voice|the voice)", "omit voice", message)
    return re.sub(r"\s*\(see vox voices -m [^)]*\)", " (see GET /v1/audio/voices)", message)


def classify_failure(e: BaseException, service: SpeechService, metrics: ServerMetrics) -> APIError:
    """An error before the first audio -> the HTTP answer (never a 500 for what the user can fix),
    counted in the request metrics by its outcome."""
    error = _classify(e, service, metrics)
    error.counted = True
    return error


def _classify(e: BaseException, service: SpeechService, metrics: ServerMetrics) -> APIError:
    cause: BaseException = e
    while isinstance(cause, SpeechFailed) and cause.__cause__ is not None:
        cause = cause.__cause__
    message = re.sub(r"^request \d+ was refused: ", "", str(cause)) or type(cause).__name__
    if isinstance(cause, RequestRejected):
        if "the pool has only" in message:  # larger than the whole KV pool: retrying cannot help
            metrics.reject("too_large")
            return APIError(413, f"this request can never fit this server: {message}.", "input")
        metrics.reject(_refusal_reason(message))
        message = re.sub(r"^overloaded: ", "", message)
        retry = service.retry_after(getattr(cause, "retry_after", None))
        return APIError(503, f"the server is at capacity: {message}.", kind="overloaded",
                        headers={"Retry-After": str(retry)})
    if isinstance(cause, EngineClosed):
        metrics.reject("closed")
        return APIError(503, f"the server is shutting down: {message}.", kind="overloaded",
                        headers={"Retry-After": "5"})
    if isinstance(cause, InputError):
        metrics.requests.labels(outcome="invalid").inc()
        param = param_of(str(cause), SpeechBody) or "input"
        return APIError(400, _sentence(_no_cli_flags(str(cause))), param)
    metrics.requests.labels(outcome="failed").inc()
    if isinstance(cause, RequestFailed):
        return APIError(500, f"synthesis failed: {message}.", kind="server_error")
    return APIError(500, f"internal error: {type(cause).__name__}: {message}.", kind="server_error")


def _refusal_reason(message: str) -> str:
    """The `vox_rejections_total` label of an admission's refusal (its sentence says which bound)."""
    if "queue is full" in message:
        return "queue_full"
    if "time to first audio" in message:
        return "ttfa_gate"
    if "playback deadline" in message:
        return "deadlines"
    return "admission"


class StreamRun:
    """What one streamed response came to: `outcome` is "cancelled" until the stream says otherwise
    ("generated": all audio handed over, delivery still to be seen; "failed"; "stopped_reading")."""

    def __init__(self, delivery: Delivery) -> None:
        self.delivery = delivery
        self.outcome = "cancelled"


# the server log (uvicorn's): an expected failure is one line there, not a traceback
LOG = logging.getLogger("uvicorn.error")


class MidStreamFailure(Exception):
    """The speech failed after its audio began: a raw audio body cannot carry an error, so the
    response is cut (an incomplete chunked body tells the client)."""


class CountedStreamingResponse(StreamingResponse):
    """A StreamingResponse that runs `on_end` once it is over, however it ended; a `MidStreamFailure`
    cuts the connection with one log line (raised to uvicorn it cut it with an ASGI traceback)."""

    def __init__(self, content: Any, on_end: Callable[[], Awaitable[None]], **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self._on_end = on_end

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        except MidStreamFailure as e:
            transport = scope.get("extensions", {}).get(TRANSPORT_KEY)
            if transport is None:  # another server: raising is the only way to cut the body
                raise
            LOG.warning("%s %s: %s", scope.get("method", ""), scope.get("path", ""), e)
            transport.abort()
            await asyncio.sleep(0)  # its connection_lost runs: uvicorn sees a client gone, not an app bug
        finally:
            await self._on_end()


def stopped(e: BaseException | None) -> bool:
    """The job ended because it was told to stop (its client left), however `speak` wrapped that."""
    while e is not None:
        if isinstance(e, Stopped):
            return True
        e = e.__cause__
    return False


def build_router(service: SpeechService, metrics: ServerMetrics) -> APIRouter:
    router = APIRouter()
    limits = service.limits
    sr = service.spec.sample_rate

    @router.post(SPEECH_PATH)
    async def speech(body: SpeechBody, request: Request) -> Response:
        arrived = time.perf_counter()
        accepted = (service.model_id, *OPENAI_MODEL_ALIASES)
        if body.model not in accepted:
            raise APIError(400, f"model {body.model!r} is not served here; use {service.model_id!r} (or one "
                                f"of the OpenAI names {', '.join(OPENAI_MODEL_ALIASES)}).", "model")
        text = body.input.strip()
        if not text:
            raise APIError(400, "input is empty; give some words to say.", "input")
        check_text_fields(body)
        if len(body.input) > limits.max_input_chars:
            raise APIError(400, f"input has {len(body.input)} characters; this server accepts at most "
                                f"{limits.max_input_chars} per request (split the text).", "input")
        if body.speed != 1.0:
            raise APIError(400, f"speed {body.speed:g} is not supported: the model speaks at its own pace; "
                                "omit speed or send 1.0.", "speed")
        fmt = body.response_format.lower()
        here = encoding.formats_here()
        if fmt not in here:
            raise APIError(400, f"response_format {body.response_format!r} is not available here; use one of "
                                f"{', '.join(here)}.", "response_format")
        if body.stream_format == "sse" and not FORMATS[fmt].streamable:
            raise APIError(400, f"stream_format sse carries {' or '.join(STREAMABLE)} audio, not {fmt}; use "
                                "response_format pcm (or wav).", "stream_format")
        if body.stream_format == "sse" and body.stream is False:
            raise APIError(400, "stream false asks for one whole file, but stream_format sse is a stream of "
                                "events; omit one of them.", "stream")
        template = template_from(body, service)
        shown: TextLog | None = None
        if body.show_text:
            if not service.session.writes_text:
                raise APIError(400, f"show_text: {no_text_phase(service.model_id)}; omit show_text.",
                               "show_text")
            shown = TextLog()
        options = SpeakOptions(fixed_frames=body.fixed_frames,
                               on_text=shown.add if shown is not None else None)
        return await _speak(body, request, text, template, options, fmt, shown, arrived)

    async def _speak(body: SpeechBody, request: Request, text: str, template: RequestTemplate,
                     options: SpeakOptions, fmt: str, shown: TextLog | None, arrived: float) -> Response:
        job = service.job(asyncio.get_running_loop())
        job.speak(text, template, options)
        # from now on a client that leaves cancels the job, even while it still waits for admission
        watcher = asyncio.create_task(_watch_disconnect(request, job))
        clock = PlaybackClock(sr, arrived)
        first = await job.next()
        if first.kind != "audio":
            watcher.cancel()
            job.cancel()
            if stopped(first.error):
                metrics.requests.labels(outcome="cancelled").inc()
                return Response(status_code=499)  # nobody reads it: the client closed the connection
            if first.kind == "error":
                raise classify_failure(first.error or RuntimeError("unknown"), service, metrics)
            metrics.requests.labels(outcome="failed").inc()
            raise APIError(500, "the model produced no audio for this input.", kind="server_error")
        clock.chunk(first.pcm.size, first.t)  # type: ignore[union-attr]
        if clock.ttfa is not None:
            metrics.ttfa.observe(clock.ttfa)
        streamed = client_streams(body.stream, body.stream_format, request.headers)
        if not FORMATS[fmt].streamable or not streamed:  # whole: a WAV header with its real length
            return await _whole_file(job, first, fmt, clock, metrics, watcher, shown)
        run = StreamRun(Delivery(request.scope, limits.write_stall_s, limits.max_unread_bytes))
        headers = {"Cache-Control": "no-store", "X-Sample-Rate": str(sr)}
        if shown is not None:  # the text written before the first audio (the body may carry more, sse)
            headers[TEXT_HEADER] = text_header(shown.all())
        body_iter = _stream(job, first, fmt, body.stream_format, clock, run, watcher, len(text), shown)
        media = "text/event-stream" if body.stream_format == "sse" else FORMATS[fmt].media_type
        if clock.ttfa is not None:
            headers["X-TTFA-Ms"] = f"{clock.ttfa * 1000:.1f}"

        async def count() -> None:
            """Once the response is over (sent, or cut): its outcome, from what the client received."""
            outcome = run.outcome
            if outcome == "generated":
                outcome = "done" if await run.delivery.delivered() else "stopped_reading"
            run.delivery.close()  # a stream cut short: our descriptor of its socket goes too
            metrics.requests.labels(outcome=outcome).inc()
            metrics.audio.inc(clock.audio_s)
            if outcome == "done":
                metrics.stall.observe(clock.stall_s)

        return CountedStreamingResponse(body_iter, count, media_type=media, headers=headers)

    async def _stream(job: SpeechJob, first: Item, fmt: str, stream_format: str, clock: PlaybackClock,
                      run: StreamRun, watcher: asyncio.Task[None], chars: int,
                      shown: TextLog | None) -> AsyncIterator[bytes]:
        sse = stream_format == "sse"

        def texts() -> bytes:  # sse: each text segment as an event, before the audio that follows it
            return b"".join(encoding.sse_text(t) for t in shown.new()) if sse and shown is not None else b""

        try:
            data = encoding.stream_prefix(fmt, sr) + encoding.pcm_bytes(first.pcm)  # type: ignore[arg-type]
            yield texts() + encoding.sse_delta(data) if sse else data
            while True:
                item = await job.next()
                if item.kind == "audio":
                    clock.chunk(item.pcm.size, item.t)  # type: ignore[union-attr]
                    data = encoding.pcm_bytes(item.pcm)  # type: ignore[arg-type]
                    if not await run.delivery.writable():
                        run.outcome = "stopped_reading"  # dropped: the job is cancelled below
                        return
                    yield texts() + encoding.sse_delta(data) if sse else data
                elif item.kind == "end":
                    run.outcome = "generated"
                    if sse:
                        yield texts() + encoding.sse_done(clock.audio_s, chars)
                    return
                else:
                    if stopped(item.error):
                        return  # the client left
                    run.outcome = "failed"
                    message = str(item.error)
                    if sse:
                        yield encoding.sse_error(message)
                        return
                    # a raw audio body cannot carry an error: end it abruptly (incomplete chunked body)
                    raise MidStreamFailure(f"speech failed mid-stream: {message}")
        finally:
            watcher.cancel()
            job.cancel()  # no-op when finished; frees pages and slots when the client left early

    async def _whole_file(job: SpeechJob, first: Item, fmt: str, clock: PlaybackClock, metrics: ServerMetrics,
                          watcher: asyncio.Task[None], shown: TextLog | None) -> Response:
        pieces = [first.pcm]
        try:
            while True:
                item = await job.next()
                if item.kind == "audio":
                    clock.chunk(item.pcm.size, item.t)  # type: ignore[union-attr]
                    pieces.append(item.pcm)
                elif item.kind == "end":
                    break
                else:
                    raise classify_failure(item.error or RuntimeError("unknown"), service, metrics)
        finally:
            watcher.cancel()
            job.cancel()
        metrics.requests.labels(outcome="done").inc()
        metrics.audio.inc(clock.audio_s)
        pcm = np.concatenate([np.asarray(p, dtype=np.float32).reshape(-1) for p in pieces])
        data = await asyncio.to_thread(encoding.encode_whole, pcm, sr, fmt)
        headers = {"Cache-Control": "no-store"}
        if shown is not None:
            headers[TEXT_HEADER] = text_header(shown.all())
        return Response(data, media_type=FORMATS[fmt].media_type, headers=headers)

    @router.get("/v1/audio/voices")
    async def voices() -> dict[str, Any]:
        spec = service.spec
        languages = ["auto", *(x for x in spec.languages if x.lower() != "auto")]
        return {"model": service.model_id, "voices": list(spec.voices),
                "openai_voices": dict(table_for(service)), "languages": languages,
                "modes": list(spec.modes), "sample_rate": spec.sample_rate,
                "response_formats": list(encoding.formats_here())}

    @router.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": service.model_id, "object": "model", "created": 0,
                                            "owned_by": "voxcli"}]}

    @router.get("/health")
    async def health() -> JSONResponse:
        dead = service.dead
        body = {"status": "ok" if dead is None else "failed", "model": service.model_id,
                "active": service.active, "queued": service.queued()}
        if dead is not None:
            body["reason"] = dead
        return JSONResponse(body, status_code=200 if dead is None else 503)

    @router.get("/metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    return router


TEXT_HEADER = "X-Vox-Text"


def text_header(texts: list[str]) -> str:
    """The text segments, one per line, as UTF-8 percent-encoded (a header value is ASCII)."""
    return quote("\n".join(texts), safe=" ")


async def _watch_disconnect(request: Request, job: SpeechJob) -> None:
    """Cancel the job the moment the client goes away (the body was already read, so the only message
    left on `receive` is the disconnect)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            job.cancel()
            job.queue.put_nowait(Item("error", error=Stopped()))
            return
