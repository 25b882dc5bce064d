"""Band-limited resampling with a Hann-windowed sinc (the method and defaults of torchaudio's
`functional.resample`, which transformers' Higgs audio tokenizer calls for its 16 kHz semantic branch:
6 zero crossings, roll-off 0.99).

The ratio is reduced by the gcd to `orig` -> `new`; output sample j of every group of `new` is a fixed
FIR filter over the input, so the whole resample is one strided conv1d with `new` output channels. The
filter is evaluated in the waveform's dtype (float32 for float32 audio), as the reference does, so the
semantic features, and through them the codes, match it exactly. (torchaudio_resample.py is the other
variant: its kernel built in float64, as `transforms.Resample` does, for CosyVoice 3's and Zonos' clips.)
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

ZERO_CROSSINGS = 6
ROLLOFF = 0.99


def sinc_kernel(orig: int, new: int, dtype: torch.dtype) -> tuple[torch.Tensor, int]:
    """Filters [new, 1, 2 * width + orig] and the half-width `width` (in input samples) for a reduced
    ratio orig -> new."""
    cutoff = min(orig, new) * ROLLOFF  # anti-aliasing below the lower Nyquist (also on upsampling: edges)
    width = math.ceil(ZERO_CROSSINGS * orig / cutoff)
    taps = torch.arange(-width, width + orig, dtype=dtype)[None, None] / orig
    t = torch.arange(0, -new, -1, dtype=dtype)[:, None, None] / new + taps
    t *= cutoff
    t = t.clamp_(-ZERO_CROSSINGS, ZERO_CROSSINGS)
    window = torch.cos(t * math.pi / ZERO_CROSSINGS / 2) ** 2
    t *= math.pi
    kernel = torch.where(t == 0, torch.tensor(1.0).to(t), t.sin() / t)
    kernel *= window * (cutoff / orig)
    return kernel, width


def resample(wav: torch.Tensor, orig_rate: int, new_rate: int) -> torch.Tensor:
    """wav [..., T] at `orig_rate` -> [..., ceil(T * new / orig)] at `new_rate`."""
    if orig_rate <= 0 or new_rate <= 0:
        raise ValueError(f"sample rates must be positive, got {orig_rate} and {new_rate}")
    if orig_rate == new_rate:
        return wav
    g = math.gcd(int(orig_rate), int(new_rate))
    orig, new = int(orig_rate) // g, int(new_rate) // g
    kernel, width = sinc_kernel(orig, new, wav.dtype)
    shape = wav.shape
    x = wav.reshape(-1, shape[-1])
    n = x.shape[-1]
    y = F.conv1d(F.pad(x, (width, width + orig))[:, None], kernel.to(x.device), stride=orig)
    y = y.transpose(1, 2).reshape(x.shape[0], -1)[..., : math.ceil(new * n / orig)]
    return y.reshape(*shape[:-1], y.shape[-1])
