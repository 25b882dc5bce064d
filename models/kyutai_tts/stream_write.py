"""Write a safetensors file one tensor at a time: the header (names, dtypes, shapes, offsets) is known from
the plan before any tensor exists, so each tensor is drawn, written and dropped in turn and a 3 GB file
never sits in memory (safetensors' `save_file` takes the whole dict at once)."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Mapping
from pathlib import Path

import torch

# torch dtype -> the format's dtype names (the ones a Kyutai release uses)
_NAMES = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16", torch.float64: "F64"}


def write_streamed(path: Path, plan: Mapping[str, tuple[tuple[int, ...], torch.dtype]],
                   draw: Callable[[str, tuple[int, ...], torch.dtype], torch.Tensor],
                   metadata: dict[str, str] | None = None) -> int:
    """Write `plan`'s tensors (name -> shape, dtype), in name order, each `draw(name, shape, dtype)` called
    just before it is written; returns the bytes of tensor data. A drawn tensor of another shape or dtype
    than planned is an error (the header already promised it)."""
    names = sorted(plan)
    header: dict[str, object] = {}
    offset = 0
    for name in names:
        shape, dtype = plan[name]
        if dtype not in _NAMES:
            raise ValueError(f"{name}: no safetensors name for {dtype}")
        n = torch.Size(shape).numel() * dtype.itemsize
        header[name] = {"dtype": _NAMES[dtype], "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    if metadata:
        header = {"__metadata__": dict(metadata), **header}
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned, as safetensors writes it
    tmp = path.with_name(path.name + ".part")
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(raw)))
            f.write(raw)
            for name in names:
                shape, dtype = plan[name]
                t = draw(name, shape, dtype)
                if tuple(t.shape) != tuple(shape) or t.dtype != dtype:
                    raise ValueError(f"{name}: drew {tuple(t.shape)} {t.dtype}, "
                                     f"planned {tuple(shape)} {dtype}")
                if t.numel():
                    f.write(t.contiguous().reshape(-1).view(torch.uint8).numpy())
                del t
    except BaseException:
        tmp.unlink(missing_ok=True)  # a half-written file must not pass for a checkpoint
        raise
    tmp.rename(path)
    return offset
