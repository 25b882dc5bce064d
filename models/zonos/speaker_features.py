"""The speaker model's front end, as the reference computes it (zonos/speaker_cloning.py: `prepare_input` and
`logFbankCal`), in plain torch (torchaudio does not load next to torch 2.13):

- the clip (mono; channels averaged) resampled to 16 kHz with torchaudio's windowed-sinc `Resample`
  defaults (models/audio/torchaudio_resample.py reproduces its kernel arithmetic);
- torchaudio's `MelSpectrogram` at its defaults but for the reference's sizes: 512-point FFT, 400-sample
  (25 ms) periodic Hann window, 160-sample (10 ms) hop, centred with reflect padding, power 2, 80 HTK mel
  bands from 0 Hz to 8 kHz without normalisation;
- log(mel + 1e-6), then each band's mean over time subtracted.

Clip checks are one sentence each and run before any model is touched.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..audio.torchaudio_resample import resample
from ..base import InputError

RATE = 16000
N_FFT = 512
WIN = 400  # int(0.025 * 16000)
HOP = 160  # int(0.01 * 16000)
N_MELS = 80
# Shorter clips hold too little of the voice for a speaker embedding (the reference's examples use seconds).
MIN_CLIP_S = 0.5
# The embedder's cost grows with the clip (real size: about 0.2 TFLOP per second of audio); 30 s is ample.
MAX_CLIP_S = 30.0
MIN_RATE = 8000  # below telephone rate a clip holds too little of the voice


def check_clip(wav: np.ndarray | None, rate: int | None) -> None:
    """One-sentence errors for a clip the speaker model cannot take (any rate from 8 kHz is resampled)."""
    if wav is None:
        raise InputError("a speaker embedding from a clip needs the clip (--ref-audio)")
    if rate is None or rate < MIN_RATE:
        raise InputError(
            f"the reference audio is sampled at {rate} Hz; Zonos' speaker model needs at least {MIN_RATE} Hz"
        )
    x = np.asarray(wav)
    if x.ndim != 1 or x.size == 0 or not np.isfinite(x).all():
        raise InputError("the reference audio must be finite mono samples (1-D, non-empty, no NaN)")
    seconds = x.size / rate
    if seconds < MIN_CLIP_S:
        raise InputError(
            f"the reference audio is {seconds * 1000:.0f} ms; give at least {MIN_CLIP_S:g} s of the voice"
        )
    if seconds > MAX_CLIP_S:
        raise InputError(
            f"the reference audio is {seconds:.1f} s; Zonos' speaker model takes at most {MAX_CLIP_S:g} s"
        )


def _hz_to_mel(f: float) -> float:
    return 2595.0 * math.log10(1.0 + f / 700.0)


def htk_mel_filters(n_freqs: int = N_FFT // 2 + 1, n_mels: int = N_MELS, rate: int = RATE) -> torch.Tensor:
    """[n_freqs, n_mels] triangular HTK filters, unnormalised, in float32 as torchaudio builds them."""
    freqs = torch.linspace(0, rate // 2, n_freqs)
    mels = torch.linspace(_hz_to_mel(0.0), _hz_to_mel(rate / 2), n_mels + 2)
    edges = 700.0 * (10 ** (mels / 2595.0) - 1.0)
    widths = edges[1:] - edges[:-1]
    slopes = edges[None, :] - freqs[:, None]  # [n_freqs, n_mels + 2]
    down = -slopes[:, :-2] / widths[:-1]
    up = slopes[:, 2:] / widths[1:]
    return torch.clamp(torch.minimum(down, up), min=0.0)


def log_fbank(wav16k: torch.Tensor) -> torch.Tensor:
    """[B, n] float32 at 16 kHz -> [B, 80, frames] mean-normalised log mel power."""
    window = torch.hann_window(WIN, dtype=wav16k.dtype, device=wav16k.device)
    spec = torch.stft(
        wav16k,
        N_FFT,
        hop_length=HOP,
        win_length=WIN,
        window=window,
        center=True,
        pad_mode="reflect",
        normalized=False,
        onesided=True,
        return_complex=True,
    )
    power = spec.abs().pow(2.0)  # [B, freqs, frames]
    fb = htk_mel_filters().to(power)
    mel = torch.matmul(power.transpose(-1, -2), fb).transpose(-1, -2)
    logmel = torch.log(mel + 1e-6)
    return logmel - logmel.mean(dim=2, keepdim=True)


def clip_input(wav: np.ndarray, rate: int) -> torch.Tensor:
    """A checked mono clip -> [1, n16k] float32 at 16 kHz, as the reference's `prepare_input`."""
    x = torch.from_numpy(np.ascontiguousarray(wav, dtype=np.float32))[None]
    return resample(x, int(rate), RATE)
