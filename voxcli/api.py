"""The Python API: speech from Python, on the same engine session the CLI and the server open.

    import voxcli
    with voxcli.load("demo") as tts:
        audio = tts.say("Hello there.", voice="Ryan")
        audio.save("hello.wav")

`load` takes what the CLI's flags take (model, recipe=, executor=, device=, dtype=, policy=, gpu=,
settings={...} as `--set`) and opens the engine through `voxcli.session`, the one place any front end
does. A request takes the fields a JSONL batch line takes (voice, lang, instructions, seed, cfg_scale,
options) plus ref_audio/ref_text, sampling and max_frames, checked by `voxcli.request_fields`: a bad
value raises `RequestFieldError` (a `VoxError` and a `ValueError`) with one sentence, before synthesis.
What the model refuses raises its `InputError`; what the engine refuses `RequestRejected` (full) or
`RequestFailed`, each with the engine's own sentence (and a note naming the sentence of a longer text).

`import voxcli` does not import this module (it loads on first use of `voxcli.load`), and this module
imports numpy only: torch loads with the model.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from voxcli.request_fields import (
    RequestFieldError,
    check_max_frames,
    check_ref_samples,
    check_seed,
    check_text_fields,
    read_ref_audio,
    sampling_params,
)
from voxcli.session import EngineOptions, Session, open_session

if TYPE_CHECKING:
    from voxcli.models.base import SamplingParams
    from voxcli.speak import RequestTemplate, SpeechStats

__all__ = ["TTS", "Audio", "load", "RequestFieldError"]

# The request fields `say`, `stream` and `batch` take (a JSONL batch line's, plus what only Python and the
# CLI can give: reference audio, sampling settings, a frame cap).
REQUEST_FIELDS = ("voice", "lang", "language", "instructions", "ref_audio", "ref_text", "seed", "sampling",
                  "cfg_scale", "max_frames", "options")
SAMPLING_FIELDS = ("greedy", "temperature", "top_k", "top_p", "repetition_penalty")


@dataclass
class Audio:
    """One utterance: mono float32 samples in [-1, 1] at `sample_rate`, and how long it took."""

    samples: np.ndarray
    sample_rate: int
    ttfa_s: float | None = None  # time to first audio: submit to the first chunk
    wall_s: float | None = None  # submit to the last chunk

    @property
    def duration_s(self) -> float:
        return self.samples.size / self.sample_rate

    def save(self, path: str | Path, format: str | None = None) -> Path:  # noqa: A002 - the CLI's --format
        """Write the audio to `path`, in `format` or the one its suffix names (wav, flac, pcm, mp3, ...).
        The file appears complete or not at all (it is written as `<path>.part`, then renamed)."""
        from voxcli.audio import FileSink, resolve_format

        fmt = resolve_format(str(path), format, False)
        sink = FileSink(Path(path), self.sample_rate, fmt)
        try:
            sink.write(self.samples)
            sink.close()
        except BaseException:
            sink.abort()
            raise
        return Path(path)


class TTS:
    """An open engine on one model. Thread-safe: `say`, `stream` and `batch` may run concurrently (the
    engine schedules them together). Close it (or use `with`) to stop the engine."""

    def __init__(self, session: Session) -> None:
        self._session = session

    @property
    def model(self) -> str:
        return self._session.model

    @property
    def sample_rate(self) -> int:
        return int(self._session.spec.sample_rate)

    def voices(self) -> list[str]:
        """The model's built-in voices (empty for a model that clones or designs voices instead)."""
        return list(self._session.spec.voices)

    def languages(self) -> list[str]:
        return list(self._session.spec.languages)

    def options(self) -> list[str]:
        """The `options={...}` the model takes, one line each (name, what it accepts, default, meaning),
        from its family's schema (models/options.py): what an error about an option refers to."""
        program = self._session.engine.program
        return program.option_schema.describe() if program is not None else []

    def say(self, text: str | Iterable[str], **fields: Any) -> Audio:
        """The whole utterance for `text` (split into sentences as the model prefers), once complete.
        `text` may also be an iterable of fragments still arriving (an LLM's tokens, a queue's items; its
        end ends the text): a model that reads text as it arrives (`streams_text`, Kyutai) speaks it as
        ONE request fed word by word, audio starting before the text ends; any other model speaks each
        sentence once it is complete."""
        pieces: list[np.ndarray] = []
        stats = self._speak(text, fields, pieces.append)
        samples = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
        return Audio(samples=samples, sample_rate=self.sample_rate, ttfa_s=stats.ttfa_s, wall_s=stats.wall_s)

    def stream(self, text: str | Iterable[str], **fields: Any) -> Iterator[np.ndarray]:
        """The audio of `text` chunk by chunk as the engine delivers it (mono float32 at `sample_rate`).
        Leaving the loop early cancels the rest of the request."""
        from voxcli.speak import Stopped

        chunks: queue.Queue[Any] = queue.Queue()
        stop = threading.Event()
        done = object()
        failure: list[BaseException] = []

        def run() -> None:
            try:
                self._speak(text, fields, chunks.put, stop)
            except BaseException as e:  # noqa: BLE001 - handed to the reading thread, raised there
                failure.append(e)
            finally:
                chunks.put(done)

        worker = threading.Thread(target=run, name="voxcli-stream", daemon=True)
        worker.start()
        try:
            while (chunk := chunks.get()) is not done:
                yield chunk
        finally:
            stop.set()
            worker.join()
        if failure and not isinstance(failure[0], Stopped):
            raise failure[0]

    async def astream(self, text: str | Iterable[str], **fields: Any) -> AsyncIterator[np.ndarray]:
        """`stream` for asyncio: chunks as they come, without blocking the event loop."""
        chunks = self.stream(text, **fields)
        end = object()
        try:
            while (chunk := await asyncio.to_thread(next, chunks, end)) is not end:
                yield chunk
        finally:
            await asyncio.to_thread(chunks.close)

    def batch(self, items: Iterable[str | Mapping[str, Any]], concurrency: int = 8,
              **fields: Any) -> list[Audio | Exception]:
        """Many utterances at once, `concurrency` in the engine together; the results in input order, a
        failed item's exception in its place (the others go on). An item is a text, or a mapping with
        "text" and any request field (a JSONL batch line's), which then overrides `fields`."""
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise RequestFieldError(f"concurrency must be at least 1, got {concurrency}.")
        requests = [_batch_item(item, fields) for item in items]

        def one(request: tuple[str, dict[str, Any]] | Exception) -> Audio | Exception:
            if isinstance(request, Exception):
                return request
            try:
                return self.say(request[0], **request[1])
            except Exception as e:  # noqa: BLE001 - one item's failure is its result; the batch goes on
                return e

        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="voxcli-batch") as pool:
            return list(pool.map(one, requests))

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> TTS:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _speak(self, text: str | Iterable[str], fields: Mapping[str, Any],
               on_audio: Callable[[np.ndarray], None], stop: threading.Event | None = None) -> SpeechStats:
        """One text through `Session.speak`, as `vox say` speaks it (a text still arriving: as `vox say -`
        does); the engine's own error raised."""
        from voxcli.speak import SpeechFailed

        template = _template(fields)
        try:
            if isinstance(text, str):
                _check_text(text)
                return self._session.speak(text, template, on_audio, stop)
            return self._session.speak(_fragments(text), template, on_audio, stop)
        except SpeechFailed as e:
            cause = e.__cause__
            if isinstance(cause, Exception):  # the typed error the engine or model raised
                if str(e) != str(cause):
                    cause.add_note(str(e))
                raise cause from None
            raise


def _fragments(text: Iterable[str]) -> Iterator[str]:
    """The fragments of a text still arriving, each checked as any text is (a string, real text)."""
    from voxcli.text import check_real_text

    if isinstance(text, bytes | bytearray | Mapping) or not isinstance(text, Iterable):
        raise RequestFieldError(f"text must be a string or an iterable of strings, got "
                                f"{type(text).__name__}.")

    def checked() -> Iterator[str]:
        for fragment in text:
            if not isinstance(fragment, str):
                raise RequestFieldError(f"each fragment of the text must be a string, got "
                                        f"{type(fragment).__name__}.")
            check_real_text(fragment, "the text")
            yield fragment

    return checked()


def load(model: str | None = None, *, recipe: str | None = None, executor: str | None = None,
         device: str | None = None, dtype: str | None = None, policy: str | None = None, gpu: str = "",
         settings: Mapping[str, Any] | Sequence[str] | None = None) -> TTS:
    """Open `model` (hub id, checkpoint folder, demo alias such as "demo"; default: the registry's
    default model) on an engine, as `vox say -m MODEL` would. The keywords are the CLI's flags:
    `settings={"policy": "sync"}` is `--set policy=sync`. Like `vox say`, every request is queued and
    served (admission "deadline") unless settings say otherwise. Raises ConfigError for settings no
    engine takes, ModelError for a model that cannot load."""
    options = EngineOptions(model=model, recipe=recipe, sets=EngineOptions.sets_from(settings), policy=policy,
                            executor=executor, device=device, gpu=gpu, dtype=dtype, admission="deadline")
    return TTS(open_session(options))


def _template(fields: Mapping[str, Any]) -> RequestTemplate:
    """A RequestTemplate from request fields, checked as the CLI checks its flags."""
    from voxcli.speak import RequestTemplate

    unknown = sorted(set(fields) - set(REQUEST_FIELDS))
    if unknown:
        raise RequestFieldError(f"unknown request field(s) {', '.join(unknown)}; known fields: "
                                f"{', '.join(REQUEST_FIELDS)}.")
    check_text_fields(dict(fields))
    check_seed(fields.get("seed"))
    check_max_frames(fields.get("max_frames"))
    ref_audio, ref_rate = _ref_audio(fields.get("ref_audio"))
    cfg_scale = fields.get("cfg_scale")
    return RequestTemplate(voice=fields.get("voice"), language=fields.get("lang", fields.get("language")),
                           instructions=fields.get("instructions"), ref_audio=ref_audio,
                           ref_sample_rate=ref_rate,
                           ref_text=fields.get("ref_text"), seed=fields.get("seed"),
                           sampling=_sampling(fields.get("sampling")),
                           max_frames=fields.get("max_frames"),
                           cfg_scale=None if cfg_scale is None else float(cfg_scale),
                           options=fields.get("options"),
                           voice_paths=True)  # the Python caller owns the files it names


def _ref_audio(value: object) -> tuple[np.ndarray | None, int | None]:
    """ref_audio: a file path, or (samples, sample_rate)."""
    if value is None or isinstance(value, str | Path):
        return read_ref_audio(value)
    if isinstance(value, tuple) and len(value) == 2:
        return check_ref_samples(value[0], value[1])
    raise RequestFieldError("ref_audio must be a file path or a (samples, sample_rate) pair.")


def _sampling(value: object) -> SamplingParams:
    """sampling: None (the model's defaults), a SamplingParams, or a mapping of its fields."""
    from voxcli.models.base import SamplingParams

    if value is None:
        return SamplingParams()
    if isinstance(value, SamplingParams):
        return sampling_params(value.greedy, value.temperature, value.top_k, value.top_p,
                               value.repetition_penalty)
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - set(SAMPLING_FIELDS))
        if unknown:
            raise RequestFieldError(f"unknown sampling field(s) {', '.join(unknown)}; known fields: "
                                    f"{', '.join(SAMPLING_FIELDS)}.")
        return sampling_params(**value)
    raise RequestFieldError("sampling must be a mapping such as {\"temperature\": 0.8} or a SamplingParams.")


def _check_text(text: object) -> None:
    from voxcli.text import check_speakable

    if not isinstance(text, str):
        raise RequestFieldError(f"text must be a string, got {type(text).__name__}.")
    if not text.strip():
        raise RequestFieldError("text is empty; give some words to say.")
    check_speakable(text, "text")


def _batch_item(item: str | Mapping[str, Any],
                fields: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | Exception:
    if isinstance(item, str):
        return item, dict(fields)
    if isinstance(item, Mapping) and isinstance(item.get("text"), str):
        return item["text"], {**fields, **{k: v for k, v in item.items() if k not in ("text", "id")}}
    return RequestFieldError("a batch item must be a text or a mapping with a \"text\" string.")
