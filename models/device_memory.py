"""Device memory helpers shared by the loaders and the engine's memory plan: how much is free, and
zero-filled pools that cost host memory only where they are written.

`torch.zeros` on the CPU writes every byte, so a KV pool sized for the worst case is resident at once.
calloc (which numpy's `zeros` uses) hands out fresh pages the kernel already zeroed and does not touch
them: a page becomes resident when the KV or codec state first lands on it. The pool still has its
planned size (the engine's memory plan bounds it); an idle engine just does not pay for it. On a GPU the
memory is allocated up front as usual.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # torch is imported where it is used: the engine's plan imports this module for sims too
    import torch

# numpy has no bfloat16: same-width storage, viewed as bfloat16
_NUMPY = {"float32": np.float32, "float16": np.float16, "int64": np.int64, "bfloat16": np.uint16}


def pool_zeros(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    import torch

    device = torch.device(device)
    name = str(dtype).removeprefix("torch.")
    if device.type != "cpu" or name not in _NUMPY:
        return torch.zeros(shape, dtype=dtype, device=device)
    t = torch.from_numpy(np.zeros(shape, dtype=_NUMPY[name]))
    return t.view(dtype) if t.dtype != dtype else t


def host_available(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """The host's MemAvailable in bytes (what the kernel can hand out without swapping); elsewhere the
    free physical pages where the C library reports them; None when nothing says."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def device_free(device: Any) -> int | None:
    """Free bytes on `device` now: GPU free memory (cudaMemGetInfo) or the host's available RAM."""
    if str(device).startswith("cuda"):
        import torch

        free, _total = torch.cuda.mem_get_info(torch.device(device))
        return int(free)
    return host_available()
