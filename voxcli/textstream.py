"""Text that streams in (tokens from an LLM, a pipe): complete sentences out as soon as they exist, and
the speaking loop that chains them while the text is still arriving.

A sentence is complete when `split_sentences` would end it there *and* something follows it (the space
after "end." — a final "." could still be "3.14" or "Dr. Smith"); CJK terminators need nothing after
them; the end of the input completes the rest. Short sentences are held and joined to the next one the
same way `split_sentences` joins them, so text piped in whole is cut exactly as the same text given as
an argument; only a short sentence that arrives after its predecessor was already spoken is spoken on
its own. The speaking loops here (`speak_live`, `speak_fed`) run under `Session.speak`
(voxcli/speak_choice.py chooses between them).
"""

from __future__ import annotations

import codecs
import itertools
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any

import numpy as np

from voxcli.audio import AudioOutputError
from voxcli.models.base import InputError, SynthesisRequest
from voxcli.models.text_feed import DEFAULT_IDLE_LIMIT_S, TextFeed
from voxcli.speak import SpeechFailed, SpeechStats, Stopped, describe
from voxcli.text import TextInputError, has_words, split_sentences

_CJK_END = "。！？」』）"


class SentenceBuffer:
    """feed(fragment) -> the sentences it completed; finish() -> what is left (at the end of input)."""

    def __init__(self, max_chars: int = 300, min_chars: int = 12) -> None:
        self.max_chars, self.min_chars = max_chars, min_chars
        self._buf = ""
        self._held: str | None = None  # complete, but short: waits to be joined to the next sentence
        self.chars = 0

    def feed(self, fragment: str) -> list[str]:
        self.chars += len(fragment)
        self._buf += fragment
        pieces = split_sentences(self._buf, self.max_chars, min_chars=1)
        if not pieces:
            return []
        ends_space = self._buf[-1].isspace()
        last = pieces[-1]
        last_complete = last[-1] in _CJK_END or (
            ends_space and len(split_sentences(f"{last} Next", self.max_chars, min_chars=1)) > 1)
        complete = pieces if last_complete else pieces[:-1]
        self._buf = "" if last_complete else last + (" " if ends_space else "")
        return self._merge(complete)

    def _merge(self, complete: list[str]) -> list[str]:
        out = []
        for p in complete:
            if self._held is not None:
                if len(self._held) < self.min_chars or len(p) < self.min_chars:
                    joined = split_sentences(f"{self._held} {p}", self.max_chars, self.min_chars)
                    if len(joined) == 1:
                        self._held = joined[0]
                        continue
                out.append(self._held)
                self._held = None
            self._held = p
        if self._held is not None and len(self._held) >= self.min_chars:
            out.append(self._held)  # long enough to stand alone: speak it now, do not wait
            self._held = None
        return out

    def finish(self) -> list[str]:
        rest = split_sentences(self._buf, self.max_chars, min_chars=1)
        self._buf = ""
        out = self._merge(rest)
        if self._held is not None:
            out.append(self._held)
            self._held = None
        return out


def read_fragments(stream: IO[str]) -> Iterator[str]:
    """Text from `stream` as soon as it arrives (not line by line, not at EOF): raw reads of whatever
    the writer has flushed, decoded as UTF-8 (a BOM is dropped) as they come. Bad UTF-8 is a
    TextInputError naming the byte and its offset. A stream with neither a file descriptor nor a byte
    buffer is read line by line."""
    chunks = _byte_chunks(stream)
    if chunks is None:
        yield from iter(stream.readline, "")
        return
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    fed = 0
    for data in chunks:
        pending = decoder.getstate()[0]
        try:
            text = decoder.decode(data, final=not data)
        except UnicodeDecodeError as e:
            where = f"byte 0x{e.object[e.start]:02x} at offset {fed - len(pending) + e.start}"
            raise TextInputError(f"standard input is not UTF-8 text ({where}); convert it (iconv -t "
                                 "utf-8).") from None
        fed += len(data)
        if text:
            yield text
        if not data:
            return


def _byte_chunks(stream: IO[str]) -> Iterator[bytes] | None:
    """Byte reads that return what is there (b"" once at the end), or None when the stream has no bytes."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        fd = -1
    if fd >= 0:
        def from_fd() -> Iterator[bytes]:
            while True:
                data = os.read(fd, 4096)
                yield data
                if not data:
                    return
        return from_fd()
    buffer = getattr(stream, "buffer", None)
    if buffer is None:
        return None
    read = getattr(buffer, "read1", None) or buffer.read

    def from_buffer() -> Iterator[bytes]:
        while True:
            data = read(4096)
            yield data
            if not data:
                return
    return from_buffer()


def sentences_from(fragments: Iterable[str], buffer: SentenceBuffer | None = None) -> Iterator[str]:
    buf = buffer or SentenceBuffer()
    for fragment in fragments:
        yield from buf.feed(fragment)
    yield from buf.finish()


def requests_from(sentences: Iterable[str],
                  make: Callable[[str], SynthesisRequest]) -> Iterator[SynthesisRequest]:
    for s in sentences:
        yield make(s)


_END = object()


def speak_live(engine: Any, requests: Iterable[SynthesisRequest], on_audio: Callable[[np.ndarray], None],
               sample_rate: int, stop: threading.Event | None = None) -> SpeechStats:
    """Like `voxcli.speak.speak`, for requests that arrive while earlier ones play: each is submitted
    when the previous one has its first audio (or, if it arrives later, as soon as it arrives), and
    their audio goes out strictly in order. `requests` may block (it is read on its own thread)."""
    stats = SpeechStats(sample_rate=sample_rate, started=time.monotonic())
    ahead: queue.Queue[Any] = queue.Queue()

    def read() -> None:
        try:
            for r in requests:
                ahead.put(r)
        except BaseException as e:  # noqa: BLE001 - the speaking loop raises it in order
            ahead.put(e)
        ahead.put(_END)

    threading.Thread(target=read, name="vox-text-in", daemon=True).start()

    def take(block: bool) -> Any:
        while True:
            if stop is not None and stop.is_set():
                raise Stopped()
            try:
                item = ahead.get(timeout=0.05) if block else ahead.get_nowait()
            except queue.Empty:
                if not block:
                    return None
                continue
            if isinstance(item, BaseException):
                raise item
            return item

    open_streams: list[Any] = []
    n = 0

    def submit(r: SynthesisRequest, previous: Any = None) -> Any:
        """A later sentence names the stream before it: the session was admitted with its first sentence
        and the engine never refuses the rest for load (Engine.submit(continues=...))."""
        nonlocal n
        n += 1
        try:
            s = engine.submit(r) if previous is None else engine.submit(r, continues=previous)
        except Stopped:
            raise
        except Exception as e:
            raise SpeechFailed(f"sentence {n}: {describe(e)}") from e
        open_streams.append(s)
        return s

    try:
        first = take(block=True)
        current = None if first is _END else submit(first)
        while current is not None:
            nxt = None
            ended = False
            try:
                for chunk in current:
                    if stop is not None and stop.is_set():
                        raise Stopped()
                    pcm = np.asarray(chunk.pcm, dtype=np.float32).reshape(-1)
                    if stats.first_audio is None:
                        stats.first_audio = time.monotonic()
                    if nxt is None and not ended:
                        r = take(block=False)
                        if r is _END:
                            ended = True
                        elif r is not None:
                            nxt = submit(r, current)
                    if pcm.size:
                        stats.samples += pcm.size
                        on_audio(pcm)
            except (Stopped, SpeechFailed):
                raise
            except Exception as e:
                raise SpeechFailed(f"sentence {stats.segments + 1}: {describe(e)}") from e
            stats.segments += 1
            open_streams.remove(current)
            if nxt is None and not ended:
                r = take(block=True)
                nxt = None if r is _END else submit(r, current)
            current = nxt
        stats.finished = time.monotonic()
        return stats
    except BaseException:
        for s in open_streams:
            try:
                s.cancel()
            except Exception:  # noqa: BLE001 - best effort on the way out
                pass
        raise


def speak_fed(engine: Any, request: SynthesisRequest, fragments: Iterable[str],
              on_audio: Callable[[np.ndarray], None], sample_rate: int, stop: threading.Event | None = None,
              idle_limit_s: float = DEFAULT_IDLE_LIMIT_S) -> SpeechStats:
    """For a model that reads text as it arrives (`ModelSpec.streams_text`, Kyutai): ONE request whose
    text is `fragments` (a pipe, a WebSocket, an LLM's tokens; read on its own thread, blocking as it
    likes), fed into the engine as they arrive, so audio starts before the text ends. The end of
    `fragments` ends the text; an error reading it cancels the request and is raised here. `request`
    carries everything but the text."""
    stats = SpeechStats(sample_rate=sample_rate, started=time.monotonic())
    feed = TextFeed(idle_limit_s=idle_limit_s)
    try:
        stream = engine.submit(request, text_feed=feed)
    except Stopped:
        raise
    except Exception as e:
        raise SpeechFailed(describe(e)) from e
    failure: list[BaseException] = []
    seen = [False]

    def pump() -> None:
        try:
            for fragment in fragments:
                if stop is not None and stop.is_set():
                    return
                seen[0] = seen[0] or has_words(fragment)
                feed.add(fragment)
            if not seen[0]:
                raise InputError("the text streamed in holds no words; send some words to say.")
            feed.close()
        except BaseException as e:  # noqa: BLE001 - raised on the speaking side, after the cancel
            failure.append(e)
            stream.cancel()

    reader = threading.Thread(target=pump, name="vox-text-feed", daemon=True)
    reader.start()
    try:
        for chunk in stream:
            if stop is not None and stop.is_set():
                raise Stopped()
            pcm = np.asarray(chunk.pcm, dtype=np.float32).reshape(-1)
            if stats.first_audio is None:
                stats.first_audio = time.monotonic()
            if pcm.size:
                stats.samples += pcm.size
                on_audio(pcm)
        stats.segments = 1
        stats.finished = time.monotonic()
        return stats
    except BaseException as e:
        stream.cancel()
        if failure:  # the text could not be read: that is the reason, not the cancel it caused
            raise failure[0] from None
        if isinstance(e, Stopped | AudioOutputError) or not isinstance(e, Exception):
            raise
        raise SpeechFailed(describe(e)) from e


def open_stdin_text(stream: IO[str]) -> Iterator[str]:
    """`vox say -`: the text fragments of `stream`, after reading up to its first non-blank text. Empty
    input or bad UTF-8 up to there is a TextInputError now, before the caller loads a model; the model
    load then waits only for the first words (a file or a fast pipe: no wait at all)."""
    fragments = read_fragments(stream)
    head: list[str] = []
    for fragment in fragments:
        head.append(fragment)
        if has_words(fragment):
            return itertools.chain(head, fragments)
    if "".join(head).strip():
        raise TextInputError("standard input holds only control characters; give some words to say.")
    raise TextInputError("the text from standard input is empty; give some words to say.")
