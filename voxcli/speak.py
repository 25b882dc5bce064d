"""Turn one text into audio through the engine: sentence segments streamed back to back, in order.

Segment i+1 is submitted as soon as segment i delivers its first audio, so the engine generates it while
segment i still streams (and plays): the listener hears one continuous utterance, and the next
sentence never competes with the current one's first chunk. `Session.speak` runs it (voxcli/speak_choice.py
chooses it for a whole text); no front end calls it directly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from voxcli.audio import AudioOutputError
from voxcli.models.base import SamplingParams, SynthesisRequest
from voxcli.text import split_sentences

if TYPE_CHECKING:
    from voxcli.speech_engine import SpeechEngine, SpeechStream


class Stopped(Exception):
    """The caller asked to stop (Ctrl-C); streams were cancelled."""


class SpeechFailed(Exception):
    """A segment could not be synthesized; the message names the sentence (when split) and the reason.
    `__cause__` is the engine's or model's own exception."""


@dataclass
class RequestTemplate:
    """Everything of a SynthesisRequest except the text (the CLI flags / a JSONL line's fields)."""

    voice: str | None = None
    language: str | None = None
    instructions: str | None = None
    ref_audio: np.ndarray | None = None
    ref_sample_rate: int | None = None
    ref_text: str | None = None
    seed: int | None = None
    sampling: SamplingParams = SamplingParams()
    max_frames: int | None = None
    cfg_scale: float | None = None
    options: dict[str, Any] | None = None  # the model family's own options (SynthesisRequest.options)
    # The voice may be a file path: True only from a local front end (the CLI, the Python API); a template
    # built from a network request (HTTP, WebSocket, Ray) keeps False (models/voices.py).
    voice_paths: bool = False

    def request(self, text: str, request_id: str | None = None) -> SynthesisRequest:
        return SynthesisRequest(text=text, voice=self.voice, language=self.language,
                                instructions=self.instructions, ref_audio=self.ref_audio,
                                ref_sample_rate=self.ref_sample_rate, ref_text=self.ref_text, seed=self.seed,
                                sampling=self.sampling, max_frames=self.max_frames, cfg_scale=self.cfg_scale,
                                options=dict(self.options or {}), request_id=request_id,
                                voice_paths=self.voice_paths)

    def with_fields(self, **fields: Any) -> RequestTemplate:
        return replace(self, **{k: v for k, v in fields.items() if v is not None})


@dataclass
class SpeechStats:
    sample_rate: int
    started: float
    first_audio: float | None = None
    finished: float | None = None
    samples: int = 0
    segments: int = 0

    @property
    def ttfa_s(self) -> float | None:
        return None if self.first_audio is None else self.first_audio - self.started

    @property
    def audio_s(self) -> float:
        return self.samples / self.sample_rate

    @property
    def wall_s(self) -> float:
        return (self.finished or time.monotonic()) - self.started

    @property
    def rtf(self) -> float | None:
        """Real-time factor: wall time / audio time (below 1 = faster than real time)."""
        return self.wall_s / self.audio_s if self.samples else None


def segment_requests(text: str, template: RequestTemplate, max_chars: int = 300,
                     frame_cap: Callable[[str], int] | None = None,
                     split: bool = True) -> list[SynthesisRequest]:
    """One request per sentence segment (`split=False`: one for the whole text, for models that read a
    dialogue at once). `frame_cap(segment)` bounds generation when the user gave no --max-frames (the demo
    models' random weights rarely choose to stop on their own)."""
    out = []
    segments = split_sentences(text, max_chars=max_chars) if split else [" ".join(text.split())]
    for s in segments:
        req = template.request(s)
        if req.max_frames is None and frame_cap is not None:
            req.max_frames = frame_cap(s)
        out.append(req)
    return out


def speech_length_cap(frame_rate: float, chars_per_second: float = 15.0,
                      slack: float = 1.5) -> Callable[[str], int]:
    """A frame cap from the text's length at a typical speaking rate, with slack."""
    def cap(text: str) -> int:
        return max(12, round(len(text) / chars_per_second * frame_rate * slack))
    return cap


def speak(engine: SpeechEngine, requests: Sequence[SynthesisRequest], on_audio: Callable[[np.ndarray], None],
          sample_rate: int, stop: threading.Event | None = None) -> SpeechStats:
    """Stream `requests` through `engine` in order, calling `on_audio(pcm)` for every chunk.
    Raises the request's failure (InputError, RequestFailed...) naming the segment when there are
    several; `Stopped` when `stop` is set. Outstanding streams are cancelled on any exit."""
    stats = SpeechStats(sample_rate=sample_rate, started=time.monotonic())
    streams: list[SpeechStream] = []
    try:
        if requests:
            streams.append(_submit(engine, requests, 0))
        for i in range(len(requests)):
            got_first = False
            for chunk in streams[i]:
                if stop is not None and stop.is_set():
                    raise Stopped()
                pcm = np.asarray(chunk.pcm, dtype=np.float32).reshape(-1)
                if stats.first_audio is None:
                    stats.first_audio = time.monotonic()
                if not got_first:
                    got_first = True
                    if i + 1 < len(requests):
                        streams.append(_submit(engine, requests, i + 1, streams[i]))
                if pcm.size:
                    stats.samples += pcm.size
                    on_audio(pcm)
            if not got_first and i + 1 < len(requests):  # a segment with no audio at all
                streams.append(_submit(engine, requests, i + 1, streams[i]))
            stats.segments += 1
            if stop is not None and stop.is_set():
                raise Stopped()
        stats.finished = time.monotonic()
        return stats
    except BaseException as e:
        for s in streams[stats.segments:]:
            try:
                s.cancel()
            except Exception:  # noqa: BLE001 - cancelling is best effort on the way out
                pass
        # an output that cannot be written (a full disk) is no sentence's failure: said as it is
        if isinstance(e, Exception) and not isinstance(e, Stopped | SpeechFailed | AudioOutputError):
            where = f"sentence {stats.segments + 1} of {len(requests)}: " if len(requests) > 1 else ""
            raise SpeechFailed(f"{where}{describe(e)}") from e
        raise


def _submit(engine: SpeechEngine, requests: Sequence[SynthesisRequest], index: int,
            previous: SpeechStream | None = None) -> SpeechStream:
    """Submit sentence `index`; a later sentence names the stream before it (`continues`): the engine
    admitted the whole text with its first sentence and never refuses the rest for load."""
    try:
        if previous is not None:
            return engine.submit(requests[index], continues=previous)
        return engine.submit(requests[index])
    except Stopped:  # the caller stopped (Session.speak refuses a new sentence then): no sentence's failure
        raise
    except Exception as e:
        where = f"sentence {index + 1} of {len(requests)}: " if len(requests) > 1 else ""
        raise SpeechFailed(f"{where}{describe(e)}") from e


def describe(e: BaseException) -> str:
    """The sentence an engine/model error carries (`reason` when the engine gives one)."""
    reason = getattr(e, "reason", None)
    text = reason if isinstance(reason, str) and reason else str(e)
    return text or type(e).__name__
