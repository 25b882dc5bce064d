"""A reference clip at the rate a family's encoder reads: one rule for every family that clones.

A clip recorded at another rate is resampled (models/audio/resample.py, transformers' sinc kernel), never
refused: a user's 16 kHz or 44.1 kHz recording is as good a voice prompt as a 24 kHz one.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..base import InputError
from .resample import resample


def clip_at(wav: Any, rate: int, target: int) -> np.ndarray:
    """`wav` (mono samples at `rate` Hz) as float32 samples at `target` Hz."""
    if int(rate) <= 0:
        raise InputError(f"the reference audio's sample rate must be positive, got {rate}")
    x = np.asarray(wav, dtype=np.float32)
    if x.ndim != 1 or x.size == 0:
        raise InputError(f"the reference audio must be mono samples (one dimension, at least one), got "
                         f"shape {x.shape}")
    if int(rate) == int(target):
        return x
    return resample(torch.from_numpy(np.ascontiguousarray(x)), int(rate), int(target)).numpy()
