"""Response bodies. The encoders are `voxcli.audio`'s (same int16 rounding as `vox say`'s output):

    wav   streamed: a WAV header whose sizes say "unknown length" (what streaming WAV writers send when
          they cannot seek back; readers read to the end of the stream), then PCM16 as it is generated;
          for a client that reads the whole body first (`streaming_choice.py`), one file with exact sizes
    pcm   streamed: headerless 16-bit little-endian mono PCM at the model's sample rate
    flac, mp3 (when this libsndfile can encode them): the whole utterance, encoded once it is complete
          (a FLAC/MP3 file cannot start before its length is known without a streaming encoder)
    sse   `stream_format=sse`: `data: {"type": "speech.audio.delta", "audio": <base64 wav/pcm bytes>}`
          events, then `speech.audio.done` with usage, or `error` (the OpenAI event names)
"""

from __future__ import annotations

import base64
import functools
import json
from typing import Any

import numpy as np

from voxcli.audio import FORMATS, stream_prefix, supported_formats

__all__ = ["formats_here", "pcm_bytes", "stream_prefix", "encode_whole", "sse_event", "sse_delta", "sse_text",
           "sse_done", "sse_error"]


@functools.cache
def formats_here() -> tuple[str, ...]:
    """The response formats this installation can produce: the table's served formats that this libsndfile
    encodes (asking it costs ~1 ms: once)."""
    here = set(supported_formats())
    return tuple(name for name, f in FORMATS.items() if f.served and name in here)


def pcm_bytes(pcm: np.ndarray) -> bytes:
    """PCM16 bytes, sample for sample what `voxcli.audio.to_int16` gives (clip(x, -1, 1) * 32767, rounded
    half to even), in place on one float32 copy: this runs for every chunk of every stream."""
    x = np.array(pcm, dtype=np.float32).reshape(-1)
    np.clip(x, -1.0, 1.0, out=x)
    np.multiply(x, np.float32(32767.0), out=x)
    np.rint(x, out=x)
    return x.astype("<i2").tobytes()


def encode_whole(pcm: np.ndarray, sample_rate: int, fmt: str) -> bytes:
    """A complete file in `fmt` (flac, mp3, or wav with exact sizes) from the whole waveform."""
    return FORMATS[fmt].encode(pcm, sample_rate)


def sse_event(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def sse_delta(data: bytes) -> bytes:
    return sse_event({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode("ascii")})


def sse_text(text: str) -> bytes:
    """`show_text`: one text segment of a unified model's text phase (our event; OpenAI has none)."""
    return sse_event({"type": "speech.text.delta", "text": text})


def sse_done(audio_s: float, input_chars: int) -> bytes:
    return sse_event({"type": "speech.audio.done",
                      "usage": {"input_characters": input_chars, "output_audio_seconds": round(audio_s, 4)}})


def sse_error(message: str) -> bytes:
    return sse_event({"type": "error", "error": {"message": message}})
