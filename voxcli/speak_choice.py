"""The one way a text is spoken: which loop speaks it, the frame cap, and the text the model writes.

`Session.speak` runs `speak_source`; every front end (`vox say`/`reply`, the Python API, HTTP, the
WebSocket, `vox batch`, the Ray front door) calls `Session.speak`, so this choice is made here only:

    source                        model                             requests
    a whole text (str)            reads sentences                   one per sentence, each submitted when
                                                                    the one before has its first audio
                                  reads whole texts (Dia)           one for the whole text
    a text still arriving         reads text as it arrives, and     ONE, its words fed as they arrive
    (an iterable of fragments)    the engine takes a feed (Kyutai)  (textstream.speak_fed)
                                  reads sentences                   one per sentence, once it is complete
                                                                    (textstream.speak_live)
                                  reads whole texts                 one for the whole text, at its end

A request without max_frames gets a frame cap when the model is a demo alias (its random weights rarely
choose to stop: uncapped, it would run to the engine's hard cap, minutes of noise): `frame_cap`, decided
here from the session's model name, for every front end alike. Every submit goes through one
`_Submitter`: the text router, the caller's stop and its stream tracking apply to each.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Protocol, cast

import numpy as np

from voxcli.models.base import InputError, ModelSpec, SynthesisRequest
from voxcli.models.text_feed import DEFAULT_IDLE_LIMIT_S, TextFeed
from voxcli.speak import RequestTemplate, SpeechStats, Stopped, segment_requests, speak, speech_length_cap
from voxcli.text import has_words
from voxcli.text_phase import TextRouter
from voxcli.textstream import SentenceBuffer, speak_fed, speak_live

if TYPE_CHECKING:
    from voxcli.speech_engine import FeedingEngine, SpeechEngine, SpeechStream

PLACEHOLDER_TEXT = "(flags check)"  # the text of a request checked for its fields alone

# A whole text, or its fragments as they arrive (an LLM's tokens, a pipe, a WebSocket's frames).
Source = str | Iterable[str]


class Mode(Enum):
    SENTENCES = "sentence by sentence"
    WHOLE = "whole"
    FED = "fed as it arrives"
    ARRIVING_SENTENCES = "sentence by sentence as it arrives"


@dataclass(frozen=True)
class SpeakOptions:
    """What a front end may add to one utterance beyond its text and request fields."""

    on_text: Callable[[str], None] | None = None  # each text segment the model writes (its text phase)
    on_sentence: Callable[[str], None] | None = None  # each request's text, once it is known
    on_stream: Callable[[SpeechStream], None] | None = None  # every stream submitted (a server cancels them)
    fixed_frames: int | None = None  # exactly this many frames, in one unsplit request (benchmarks)
    max_chars: int = 300  # the longest sentence segment
    idle_limit_s: float = DEFAULT_IDLE_LIMIT_S  # a fed text silent this long fails its request


class Speaker(Protocol):
    """What a caller that speaks needs of a session (`voxcli.session.Session` is one): a module below
    the session layer (`vox batch`'s) takes this instead of importing it."""

    spec: ModelSpec

    def speak(self, source: Source, template: RequestTemplate, on_audio: Callable[[np.ndarray], None],
              stop: threading.Event | None = None, options: SpeakOptions | None = None) -> SpeechStats: ...


def choose_mode(source: Source, spec: ModelSpec, engine: SpeechEngine, fixed_frames: bool = False) -> Mode:
    if isinstance(source, str):
        return Mode.SENTENCES if spec.split_sentences and not fixed_frames else Mode.WHOLE
    if spec.streams_text and engine.takes_text_feed:
        return Mode.FED
    return Mode.ARRIVING_SENTENCES if spec.split_sentences else Mode.WHOLE


def frame_cap(model: str, spec: ModelSpec) -> Callable[[str], int] | None:
    """The frames a request without max_frames may run, from its text: bounded for a demo alias (random
    weights), None (the engine's own max_frames) for a real model, whose end-of-speech decides."""
    from voxcli.models import is_demo

    return speech_length_cap(spec.frame_rate) if is_demo(model) else None


def speak_source(engine: SpeechEngine, spec: ModelSpec, model: str, check: Callable[[SynthesisRequest], None],
                 router: TextRouter | None, source: Source, template: RequestTemplate,
                 on_audio: Callable[[np.ndarray], None], stop: threading.Event | None,
                 options: SpeakOptions) -> SpeechStats:
    """Speak `source` on `engine` as the table above says (`model`: the session's model name, for the frame
    cap; `router`: the session's text router, None for a model that writes no text; `on_text` then is the
    caller's mistake, refused before this)."""
    mode = choose_mode(source, spec, engine, options.fixed_frames is not None)
    cap = frame_cap(model, spec)
    submitter = _Submitter(engine, stop, options, router)
    sr = spec.sample_rate

    def make(text: str) -> SynthesisRequest:
        req = template.request(text)
        if req.max_frames is None and cap is not None:
            req.max_frames = cap(text)
        if options.on_sentence is not None:
            options.on_sentence(text)
        return req

    try:
        if mode is Mode.FED:
            check(template.request(PLACEHOLDER_TEXT))  # the fields, before the text arrives
            return speak_fed(submitter, template.request(""), cast(Iterable[str], source), on_audio, sr,
                             stop=stop, idle_limit_s=options.idle_limit_s)
        if mode is Mode.ARRIVING_SENTENCES:
            check(template.request(PLACEHOLDER_TEXT))
            return speak_live(submitter, _arriving(cast(Iterable[str], source), make, options.max_chars),
                              on_audio, sr, stop=stop)
        if not isinstance(source, str):  # a model that reads whole texts gets the whole input, at its end
            check(template.request(PLACEHOLDER_TEXT))
            source = "".join(source).strip()
        requests = _requests(source, template, cap, mode is Mode.SENTENCES, options)
        if requests:
            check(requests[0])  # before any synthesis; every segment shares the settings
        for r in requests:
            if options.on_sentence is not None:
                options.on_sentence(r.text)
        return speak(submitter, requests, on_audio, sr, stop=stop)
    finally:
        submitter.forget()


def speak_prepared(engine: SpeechEngine, sample_rate: int, router: TextRouter | None,
                   requests: Sequence[SynthesisRequest], on_audio: Callable[[np.ndarray], None],
                   stop: threading.Event | None, options: SpeakOptions) -> SpeechStats:
    """Requests another session already shaped (a Ray replica speaking its driver's segment), as is."""
    submitter = _Submitter(engine, stop, options, router)
    try:
        return speak(submitter, requests, on_audio, sample_rate, stop=stop)
    finally:
        submitter.forget()


def _requests(text: str, template: RequestTemplate, frame_cap: Callable[[str], int] | None, split: bool,
              options: SpeakOptions) -> list[SynthesisRequest]:
    if options.fixed_frames is not None:
        req = template.request(text)
        req.fixed_frames = options.fixed_frames
        return [req]
    return segment_requests(text, template, max_chars=options.max_chars, frame_cap=frame_cap, split=split)


def _arriving(fragments: Iterable[str], make: Callable[[str], SynthesisRequest],
              max_chars: int) -> Iterator[SynthesisRequest]:
    """One request per sentence of the arriving text, each as soon as it is complete. A "sentence" of
    control characters is noise, not speech: skipped, and a text of nothing else is the sender's error."""
    buffer = SentenceBuffer(max_chars)
    seen = spoken = False
    for fragment in itertools.chain(fragments, [None]):  # None: the end of the text
        complete = buffer.feed(fragment) if fragment is not None else buffer.finish()
        seen = seen or bool(fragment and fragment.strip())
        for sentence in complete:
            if has_words(sentence):
                spoken = True
                yield make(sentence)
    if seen and not spoken:
        raise InputError("the text streamed in holds only control characters; send some words to say.")


class _Submitter:
    """What the speaking loops see as the engine: one utterance's every submit passes here."""

    def __init__(self, engine: SpeechEngine, stop: threading.Event | None, options: SpeakOptions,
                 router: TextRouter | None) -> None:
        self._engine, self._stop, self._options, self._router = engine, stop, options, router
        self._keys: list[str] = []

    def submit(self, request: SynthesisRequest, continues: SpeechStream | None = None,
               text_feed: TextFeed | None = None) -> SpeechStream:
        if self._stop is not None and self._stop.is_set():
            raise Stopped()  # no new sentence starts once the caller stopped
        on_text = self._options.on_text
        if on_text is not None and self._router is not None:
            key = self._router.follow(on_text)
            self._keys.append(key)
            request.request_id = key
        if text_feed is not None:
            stream = cast("FeedingEngine", self._engine).submit(request, text_feed=text_feed)
        elif continues is not None:
            stream = self._engine.submit(request, continues=continues)
        else:
            stream = self._engine.submit(request)
        if self._options.on_stream is not None:
            self._options.on_stream(stream)
        return stream

    def forget(self) -> None:
        if self._router is not None:
            for key in self._keys:
                self._router.forget(key)
