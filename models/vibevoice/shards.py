"""Write a checkpoint's tensors as `save_pretrained` lays them out: model.safetensors when they fit one
shard, else `model-0000N-of-0000M.safetensors` + `model.safetensors.index.json`. Tensors arrive from an
iterator and one shard is held at a time (safetensors serialises a whole file in memory)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors.torch import save_file

SHARD_BYTES = 1 << 30


def write_weights(out: Path, tensors: Iterator[tuple[str, torch.Tensor]], dtype: torch.dtype,
                  shard_bytes: int = SHARD_BYTES) -> None:
    """model.safetensors when it fits one shard, else shards + index, one shard in memory at a time."""
    parts: list[list[str]] = [[]]
    shard: dict[str, torch.Tensor] = {}
    size = total = 0
    tmp: list[Path] = []

    def flush() -> None:
        path = out / f"shard-{len(tmp)}.tmp"
        save_file(shard, str(path), metadata={"format": "pt"})
        tmp.append(path)

    for name, t in tensors:
        t = t.to(dtype).contiguous()
        n = t.numel() * t.element_size()
        if shard and size + n > shard_bytes:
            flush()
            shard, size = {}, 0
            parts.append([])
        shard[name] = t
        parts[-1].append(name)
        size += n
        total += n
    flush()
    if len(tmp) == 1:
        tmp[0].rename(out / "model.safetensors")
        return
    weight_map = {}
    for i, p in enumerate(tmp):
        final = f"model-{i + 1:05d}-of-{len(tmp):05d}.safetensors"
        p.rename(out / final)
        weight_map.update(dict.fromkeys(parts[i], final))
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2))
