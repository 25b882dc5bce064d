"""Zero-filled pools that cost host memory only where they are written.

`torch.zeros` on the CPU writes every byte, so a KV pool sized for the worst case is resident at once.
calloc (which numpy's `zeros` uses) hands out fresh pages the kernel already zeroed and does not touch
them: a page becomes resident when the KV or codec state first lands on it. The pool still has its
planned size (the engine's memory plan bounds it); an idle engine just does not pay for it. On a GPU the
memory is allocated up front as usual.
"""

from __future__ import annotations

import numpy as np
import torch

_NUMPY = {torch.float32: np.float32, torch.float16: np.float16, torch.int64: np.int64,
          torch.bfloat16: np.uint16}  # numpy has no bfloat16: same-width storage, viewed as bfloat16


def pool_zeros(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    device = torch.device(device)
    if device.type != "cpu" or dtype not in _NUMPY:
        return torch.zeros(shape, dtype=dtype, device=device)
    t = torch.from_numpy(np.zeros(shape, dtype=_NUMPY[dtype]))
    return t.view(dtype) if t.dtype != dtype else t
