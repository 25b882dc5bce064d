"""Kaldi log-mel filterbank features as upstream's frontend computes them for the speaker embedding:
`torchaudio.compliance.kaldi.fbank(speech, num_mel_bins=80, dither=0, sample_frequency=16000)`, every other
option at its default, in plain torch (torchaudio does not load next to torch 2.13).

Those defaults: 25 ms frames every 10 ms that fit in the clip (snip_edges), each frame's mean removed, a
0.97 pre-emphasis (the first sample repeated before the frame), the Povey window (Hann ** 0.85,
non-periodic), zero-padded to the next power of two (512 at 16 kHz), the power spectrum, `num_mel_bins`
triangles on Kaldi's mel scale (1127 ln(1 + f/700)) from 20 Hz to Nyquist, log(max(x, float32 eps)). No
energy column. The arithmetic (dtypes, order) is torchaudio's so the features agree to rounding.
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch
import torch.nn.functional as F

FRAME_MS, SHIFT_MS, PREEMPH, LOW_HZ = 25.0, 10.0, 0.97, 20.0
EPS = torch.finfo(torch.float32).eps


def _mel(f: torch.Tensor | float) -> torch.Tensor | float:
    if isinstance(f, float):
        return 1127.0 * math.log(1.0 + f / 700.0)
    return 1127.0 * (1.0 + f / 700.0).log()


@lru_cache(maxsize=4)
def kaldi_mel_banks(num_bins: int, padded: int, rate: float) -> torch.Tensor:
    """[num_bins, padded // 2 + 1] float32 triangles (the Nyquist column zero, as Kaldi's)."""
    nyquist = 0.5 * rate
    lo, hi = _mel(LOW_HZ), _mel(nyquist)
    delta = (hi - lo) / (num_bins + 1)
    b = torch.arange(num_bins).unsqueeze(1)
    left, center, right = lo + b * delta, lo + (b + 1.0) * delta, lo + (b + 2.0) * delta
    mel = _mel((rate / padded) * torch.arange(padded / 2)).unsqueeze(0)
    up = (mel - left) / (center - left)
    down = (right - mel) / (right - center)
    banks = torch.max(torch.zeros(1), torch.min(up, down))
    return F.pad(banks, (0, 1))


def fbank(speech: torch.Tensor, num_mel_bins: int = 80, rate: int = 16000) -> torch.Tensor:
    """speech [1, n] (or [n]) float32 in [-1, 1] -> [frames, num_mel_bins] log mel energies."""
    x = speech.reshape(-1) if speech.dim() == 1 else speech[0]
    size = int(rate * FRAME_MS * 0.001)
    shift = int(rate * SHIFT_MS * 0.001)
    if x.numel() < size:
        raise ValueError(f"the clip has {x.numel()} samples, fewer than one {FRAME_MS:g} ms frame ({size})")
    padded = 1 << (size - 1).bit_length()
    m = 1 + (x.numel() - size) // shift
    frames = x.as_strided((m, size), (shift * x.stride(0), x.stride(0)))
    frames = frames - frames.mean(dim=1, keepdim=True)
    prev = F.pad(frames.unsqueeze(0), (1, 0), mode="replicate").squeeze(0)[:, :-1]
    frames = frames - PREEMPH * prev
    window = torch.hann_window(size, periodic=False, dtype=x.dtype).pow(0.85)
    frames = F.pad(frames * window.unsqueeze(0), (0, padded - size))
    power = torch.fft.rfft(frames).abs().pow(2.0)
    energies = torch.mm(power, kaldi_mel_banks(num_mel_bins, padded, float(rate)).to(x.dtype).T)
    return torch.max(energies, torch.tensor(EPS, dtype=x.dtype)).log()
