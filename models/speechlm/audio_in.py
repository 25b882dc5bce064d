"""A user audio turn as ESPnet's preprocessor + `ParallelLLM._embed` make it (task `audio_to_text`, and the
dialogue form, which gives the same rows): see ../shared/design/unified-lm-audio-in.md section 2.

    the clip's first channel, resampled to the codec rate with torchaudio's windowed sinc (its defaults;
    models/audio/resample.py), T = n // hop frames, the waveform trimmed to T * hop samples (never
    padded), X-Codec codes [T', n_q][:, :streams], cut or last-frame-repeated to T frames, stream s offset
    into its interval (code + start_s + 1, slot 0 being the stream's pad), and the delay interleave:
    a [T + S - 1, S] block of pads with stream s's codes at rows s .. s + T - 1.

OpusLM's audio input puts an SSL stream (XEUS + k-means `km_opus_lm.mdl`) in front of the codec streams;
neither XEUS nor that k-means model is in a PyPI package, so such a checkpoint's audio input is refused.
"""

from __future__ import annotations

import numpy as np
import torch

from ..audio.resample import resample
from ..base import InputError
from .config import SpeechLMConfig

MAX_INPUT_SECONDS = 600.0  # a bound on one clip (the prompt must also fit the backbone's context)


def refuse_reason(cfg: SpeechLMConfig) -> str | None:
    """Why this checkpoint cannot take an audio turn (one sentence), or None when it can."""
    lay = cfg.layout
    io = cfg.codec
    if lay.audio_io is None:
        return f"model {cfg.root.name} has no audio IO, so it cannot hear"
    audio_input = (cfg.train.get("preprocessor") or {}).get("audio_input", lay.audio_io)
    if audio_input != lay.audio_io:
        return (
            f"model {cfg.root.name} takes audio input through {audio_input!r}, which voxcli does not "
            "implement (only the discrete audio IO)"
        )
    if lay.ssl_streams:
        return (
            f"model {cfg.root.name} tokenizes input audio with an SSL stream (XEUS + k-means) that no "
            "PyPI package provides, so voxcli cannot give it audio input"
        )
    if io.get("codec_choice") != "Xcodec":
        return (
            f"model {cfg.root.name} encodes input audio with the {io.get('codec_choice')!r} codec, whose "
            "encoder voxcli does not implement (only X-Codec's)"
        )
    if io.get("delay_interleave") is False:
        return f"model {cfg.root.name} does not delay-interleave its audio streams (voxcli needs that)"
    return None


def check_clip(pcm: np.ndarray, sample_rate: int, hop: int, codec_rate: int) -> np.ndarray:
    """The clip as float32 [channels, n] (mono given as [n]), refused in one sentence when unusable."""
    x = np.asarray(pcm)
    if x.dtype.kind not in "fiu":
        raise InputError(f"the input audio must be numbers (PCM samples), got dtype {x.dtype}")
    x = x.astype(np.float32, copy=False)
    if x.ndim == 1:
        x = x[None]
    if x.ndim != 2 or x.shape[-1] == 0:
        raise InputError(
            f"the input audio is empty or misshapen ({list(np.shape(pcm))}); give a clip of speech"
        )
    if not np.isfinite(x).all():
        raise InputError("the input audio holds NaN or infinite samples; give a clean recording")
    if not isinstance(sample_rate, int | np.integer) or not 1000 <= int(sample_rate) <= 384000:
        raise InputError(
            f"the input audio's sample rate must be an integer from 1000 to 384000 Hz, got {sample_rate}"
        )
    seconds = x.shape[-1] / int(sample_rate)
    if seconds > MAX_INPUT_SECONDS:
        raise InputError(
            f"the input audio is {seconds:.0f} s long; at most {MAX_INPUT_SECONDS:.0f} s is taken"
        )
    if x.shape[-1] * codec_rate // int(sample_rate) < hop:
        raise InputError(
            f"the input audio is {seconds * 1000:.0f} ms long; the codec needs at least one "
            f"{hop / codec_rate * 1000:.0f} ms frame"
        )
    return x


def resample_first_channel(x: np.ndarray, sample_rate: int, codec_rate: int) -> torch.Tensor:
    """[channels, n] -> [1, n'] float32 at the codec rate (the preprocessor's `wav[:1]` + torchaudio)."""
    wav = torch.from_numpy(np.ascontiguousarray(x[:1]))
    return resample(wav, int(sample_rate), codec_rate) if int(sample_rate) != codec_rate else wav


def frames(n_samples: int, hop: int) -> int:
    return n_samples // hop


def audio_block(codes: torch.Tensor, T: int, starts: np.ndarray) -> np.ndarray:
    """codes [T', S] (the codec's, per stream) -> the [T + S - 1, S] delay-interleaved block of global ids:
    `ensure_length` to T (cut, or repeat the last frame), + start_s + 1, stream s delayed by s rows over
    its pad start_s."""
    c = codes.cpu().numpy().astype(np.int64)
    if c.shape[0] > T:
        c = c[:T]
    elif c.shape[0] < T:
        c = np.concatenate([c, np.repeat(c[-1:], T - c.shape[0], axis=0)])
    S = c.shape[1]
    block = np.tile(starts[None, :], (T + S - 1, 1))
    for s in range(S):
        block[s : s + T, s] = c[:, s] + starts[s] + 1
    return block
