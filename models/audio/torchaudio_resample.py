"""Band-limited resampling as CosyVoice 3's and Zonos' upstream frontends do it
(`torchaudio.transforms.Resample(orig, new)` with its defaults: windowed sinc, Hann window, 6 zero
crossings, roll-off 0.99), in plain torch: torchaudio does not load next to torch 2.13.

Kernel arithmetic as torchaudio's, so the samples are the same: rates reduced by their gcd, the kernel
built in float64 (its first time term in float32) and stored as float32, one strided conv1d over the clip
padded by `width` on the left and `width + orig` on the right, cut to ceil(new * n / orig) samples
(that quotient rounded to float32 first, as torchaudio does).
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch
import torch.nn.functional as F

ZERO_CROSSINGS = 6
ROLLOFF = 0.99


@lru_cache(maxsize=8)
def sinc_kernel(orig: int, new: int) -> tuple[torch.Tensor, int]:
    """[new, 1, 2 * width + orig] float32 polyphase kernels for gcd-reduced rates, and the width."""
    base = min(orig, new) * ROLLOFF  # the low-pass cut-off, below both Nyquist rates
    width = math.ceil(ZERO_CROSSINGS * orig / base)
    idx = torch.arange(-width, width + orig, dtype=torch.float64)[None, None] / orig
    t = torch.arange(0, -new, -1)[:, None, None] / new + idx  # float32 term + float64 term, as torchaudio
    t = (t * base).clamp(-ZERO_CROSSINGS, ZERO_CROSSINGS)
    window = torch.cos(t * math.pi / ZERO_CROSSINGS / 2) ** 2
    t = t * math.pi
    kernels = torch.where(t == 0, torch.tensor(1.0).to(t), t.sin() / t)
    kernels = kernels * (window * (base / orig))
    return kernels.to(torch.float32), width


def resample(wav: torch.Tensor, orig_rate: int, new_rate: int) -> torch.Tensor:
    """[..., n] float32 at orig_rate -> [..., ceil(new * n / orig)] at new_rate (unchanged if equal)."""
    if orig_rate == new_rate:
        return wav
    g = math.gcd(int(orig_rate), int(new_rate))
    orig, new = int(orig_rate) // g, int(new_rate) // g
    kernel, width = sinc_kernel(orig, new)
    shape = wav.shape
    x = wav.reshape(-1, shape[-1])
    n = x.shape[-1]
    y = F.conv1d(F.pad(x, (width, width + orig))[:, None], kernel.to(x), stride=orig)
    # torchaudio rounds the target length through a float32 tensor before ceil
    keep = math.ceil(float(torch.tensor(new * n / orig, dtype=torch.float32)))
    y = y.transpose(1, 2).reshape(x.shape[0], -1)[..., :keep]
    return y.reshape(shape[:-1] + y.shape[-1:])
