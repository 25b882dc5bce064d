"""Audio in, text out through one engine session: what `vox transcribe` and the server's
/v1/audio/transcriptions share. A unified LM (models/speechlm) hears a user audio turn and answers with
text only (max_segments 1: no audio segment, so the request emits no audio chunk).

The text streams as it is decoded: the program emits `text_grew` (models/base.py's TextGrew: request id,
new text) after every text token and `text_written` (TextWritten: request id, text, ids) when the segment
ends; a `Tap` installed once per engine listens to both and routes each event to the request that wrote it
(keyed by request_id).
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from voxcli.models.base import InputError, SamplingParams, SynthesisRequest, TextGrew, TextWritten

MAX_CLIP_S = 600.0  # the family's own bound too (models/speechlm/audio_in.py)


class CannotHear(Exception):
    """The model takes no audio input; the message says so in one sentence."""


def hearing_check(program: Any, model: str) -> None:
    """Raise CannotHear unless the program takes a user audio turn."""
    hears = getattr(program, "hears", None)
    if hears is None:
        raise CannotHear(f"model {model} cannot hear: it takes text and speaks, it does not take audio input")
    why = hears()
    if why is not None:
        raise CannotHear(why)


def read_clip(path: str | Path) -> tuple[np.ndarray, int]:
    """A clip file -> (float32 [channels, n], rate), refused in one sentence before any model loads."""
    import soundfile as sf

    p = Path(path)
    if not p.exists():
        raise InputError(f"clip {p} does not exist; give a WAV/FLAC/OGG recording")
    if p.is_dir():
        raise InputError(f"clip {p} is a directory; give a WAV/FLAC/OGG recording")
    try:
        data, sr = sf.read(str(p), dtype="float32", always_2d=True)
    except (OSError, RuntimeError) as e:  # soundfile raises LibsndfileError (a RuntimeError)
        raise InputError(f"cannot read clip {p} as audio ({e}); give a WAV/FLAC/OGG file") from None
    return check_samples(data.T, int(sr), str(p))


def check_samples(samples: np.ndarray, rate: int, what: str) -> tuple[np.ndarray, int]:
    x = np.ascontiguousarray(np.asarray(samples, dtype=np.float32))
    if x.ndim == 1:
        x = x[None]
    if x.size == 0:
        raise InputError(f"clip {what} is empty; give a recording of speech")
    if not np.isfinite(x).all():
        raise InputError(f"clip {what} holds NaN or infinite samples; give a clean recording")
    if isinstance(rate, bool) or not 1000 <= rate <= 384000:
        raise InputError(f"clip {what} has sample rate {rate} Hz; give audio at 1000 to 384000 Hz")
    if x.shape[-1] / rate > MAX_CLIP_S:
        raise InputError(
            f"clip {what} is {x.shape[-1] / rate:.0f} s long; at most {MAX_CLIP_S:.0f} s is taken"
        )
    return x, rate


def request_for(
    samples: np.ndarray, rate: int, prompt: str | None = None, seed: int | None = None, greedy: bool = False
) -> SynthesisRequest:
    """A text-only answer to one user audio turn (a prompt becomes a system text turn before it)."""
    return SynthesisRequest(
        text="",
        input_audio=samples,
        input_sample_rate=rate,
        instructions=prompt or None,
        seed=seed,
        sampling=SamplingParams(greedy=greedy),
        options={"max_segments": 1},
    )


@dataclass
class Heard:
    """One request's text as it grows."""

    deltas: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    on_delta: Callable[[str], None] | None = None

    @property
    def text(self) -> str:
        return "".join(self.texts) if self.texts else "".join(self.deltas)


class Tap:
    """Installed once per program: keeps each followed request's text and calls its `on_delta`."""

    def __init__(self, program: Any) -> None:
        self._lock = threading.Lock()
        self._heard: dict[str, Heard] = {}
        self._ids = itertools.count()
        program.text_written.listen(self._written)
        program.text_grew.listen(self._grew)

    def follow(self, request: SynthesisRequest, on_delta: Callable[[str], None] | None = None) -> Heard:
        key = f"vox-heard-{next(self._ids)}"
        request.request_id = key
        heard = Heard(on_delta=on_delta)
        with self._lock:
            self._heard[key] = heard
        return heard

    def forget(self, request: SynthesisRequest) -> None:
        with self._lock:
            self._heard.pop(request.request_id or "", None)

    def _get(self, key: str | None) -> Heard | None:
        with self._lock:
            return self._heard.get(key or "")

    def _grew(self, event: TextGrew) -> None:
        h = self._get(event.request_id)
        if h is not None:
            h.deltas.append(event.delta)
            if h.on_delta is not None:
                h.on_delta(event.delta)

    def _written(self, event: TextWritten) -> None:
        h = self._get(event.request_id)
        if h is not None:
            h.token_ids.extend(int(i) for i in event.token_ids)
            h.texts.append(event.text)


_TAPS_LOCK = threading.Lock()
# one Tap per engine, kept beside it rather than on it (nothing writes into another object's fields);
# weak: the Tap goes with its engine
_TAPS: weakref.WeakKeyDictionary[Any, Tap] = weakref.WeakKeyDictionary()


def tap_of(engine: Any) -> Tap:
    """The engine's one Tap (created on first use)."""
    with _TAPS_LOCK:
        tap = _TAPS.get(engine)
        if tap is None:
            tap = _TAPS[engine] = Tap(engine.program)
        return tap
