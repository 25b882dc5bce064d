"""Log-mel spectrograms with Slaney-normalised mel filters, as Qwen3-TTS's speaker encoder and CosyVoice 3's
prompt features (Matcha-TTS's `mel_spectrogram`) compute them: reflect pad (n_fft - hop) / 2 each side,
STFT with a Hann window, center False, magnitude sqrt(re^2 + im^2 + 1e-9), log(clamp(mel, 1e-5)).

The filterbank is computed in numpy with the exact arithmetic of librosa's `filters.mel` (slaney mel
scale, slaney area norm), so librosa is not a dependency. The defaults are Qwen3-TTS's speaker encoder's
(24 kHz, n_fft 1024, hop 256, 128 mels over 0..12 kHz).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

SAMPLE_RATE = 24000
N_FFT, HOP, WIN, N_MELS, FMIN, FMAX = 1024, 256, 1024, 128, 0.0, 12000.0


def _hz_to_mel(f: np.ndarray) -> np.ndarray:
    """Slaney mel scale: linear below 1 kHz (200/3 Hz per mel), logarithmic above."""
    f = np.asarray(f, dtype=np.float64)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, math.log(6.4) / 27.0
    mels = f / f_sp
    return np.where(f >= min_log_hz, min_log_mel + np.log(np.maximum(f, 1e-300) / min_log_hz) / logstep, mels)


def _mel_to_hz(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float64)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, math.log(6.4) / 27.0
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), f_sp * m)


@lru_cache(maxsize=4)
def slaney_mel_filters(
    sr: int = SAMPLE_RATE, n_fft: int = N_FFT, n_mels: int = N_MELS, fmin: float = FMIN, fmax: float = FMAX
) -> np.ndarray:
    """[n_mels, n_fft//2 + 1] float32 triangular filters, each scaled to unit area (slaney norm)."""
    fft_freqs = np.fft.rfftfreq(n=n_fft, d=1.0 / sr)
    mel_f = _mel_to_hz(np.linspace(_hz_to_mel(np.array(fmin)), _hz_to_mel(np.array(fmax)), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fft_freqs)
    weights = np.zeros((n_mels, n_fft // 2 + 1), dtype=np.float32)
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0, np.minimum(lower, upper))  # stored as float32, like librosa
    enorm = 2.0 / (mel_f[2 : n_mels + 2] - mel_f[:n_mels])
    weights *= enorm[:, None]
    return weights


def log_mel(
    wav: torch.Tensor,
    sr: int = SAMPLE_RATE,
    n_fft: int = N_FFT,
    hop: int = HOP,
    win: int = WIN,
    n_mels: int = N_MELS,
    fmin: float = FMIN,
    fmax: float = FMAX,
) -> torch.Tensor:
    """wav [B, n] float at `sr` -> log-mel [B, frames, n_mels] (the defaults: Qwen3-TTS's speaker encoder's;
    the same recipe is Matcha-TTS's `mel_spectrogram`, which CosyVoice 3 uses with its own parameters)."""
    basis = torch.from_numpy(slaney_mel_filters(sr, n_fft, n_mels, fmin, fmax)).to(wav.device)
    pad = (n_fft - hop) // 2
    y = F.pad(wav.float().unsqueeze(1), (pad, pad), mode="reflect").squeeze(1)
    spec = torch.stft(
        y,
        n_fft,
        hop_length=hop,
        win_length=win,
        window=torch.hann_window(win, device=wav.device),
        center=False,
        normalized=False,
        onesided=True,
        return_complex=True,
    )
    mag = torch.sqrt(torch.view_as_real(spec).pow(2).sum(-1) + 1e-9)
    return torch.log(torch.clamp(torch.matmul(basis, mag), min=1e-5)).transpose(1, 2)
