"""Weights as checkpoints store them, for any family: weight-norm pairs folded into a plain weight (and the
names such a pair goes by), and a state dict written the way the hub writes one (sharded past a size) for
the tiny and real-size builders."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import nn

from .base import CheckpointError

# Weight-norm spellings a checkpoint may carry instead of a plain `weight`: (magnitude, direction).
_WEIGHT_NORM = (
    ("weight_g", "weight_v"),
    ("parametrizations.weight.original0", "parametrizations.weight.original1"),
)


def source_keys(key: str, shape: tuple[int, ...], shapes: dict[str, tuple[int, ...]], file: Path
                ) -> tuple[str, ...]:
    """The checkpoint tensors (names in `shapes`) that give module tensor `key` of `shape`: itself, or a
    weight-normed pair (magnitude, direction) to fold (`fold_weight_norm`); CheckpointError when missing
    or misshapen. The DAC-style codecs (DAC, Higgs', X-Codec) load through it."""
    if key in shapes:
        if shapes[key] != shape:
            raise CheckpointError(
                f"checkpoint {file}: tensor {key!r} has shape {list(shapes[key])}, "
                f"the architecture in config.json needs {list(shape)}"
            )
        return (key,)
    if key.endswith(".weight"):
        base = key[: -len("weight")]
        for g_name, v_name in _WEIGHT_NORM:
            g, v = base + g_name, base + v_name
            if g in shapes or v in shapes:
                want_g = (shape[0],) + (1,) * (len(shape) - 1)
                for name, want in ((g, want_g), (v, shape)):
                    if name not in shapes:
                        raise CheckpointError(
                            f"checkpoint {file}: tensor {name!r} (shape {list(want)}) is missing"
                        )
                    if shapes[name] != want:
                        raise CheckpointError(
                            f"checkpoint {file}: tensor {name!r} has shape {list(shapes[name])}, "
                            f"the architecture in config.json needs {list(want)}"
                        )
                return (g, v)
    raise CheckpointError(f"checkpoint {file}: tensor {key!r} (shape {list(shape)}) is missing")


def refuse_extra(extra: list[str], where: Any) -> None:
    """CheckpointError naming the first of the checkpoint's tensors no module tensor takes (sorted)."""
    if extra:
        raise CheckpointError(
            f"checkpoint {where} has unexpected tensor {extra[0]!r}"
            + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else "")
            + "; its config.json does not describe these weights"
        )


def read_source(get: Callable[[str], torch.Tensor], srcs: tuple[str, ...], where: Any) -> torch.Tensor:
    """The module tensor that checkpoint tensors `srcs` (`source_keys`) give, read through `get`: the one
    tensor, or a weight-norm pair folded; a NaN or inf value is a CheckpointError naming tensor and file."""
    ts = [get(s) for s in srcs]
    for s, t in zip(srcs, ts, strict=True):
        if t.is_floating_point() and not torch.isfinite(t).all():
            raise CheckpointError(f"tensor {s!r} in {where} holds NaN or inf values")
    return ts[0] if len(ts) == 1 else fold_weight_norm(ts[0], ts[1])


def assign_weights(net: nn.Module, state: dict[str, torch.Tensor], device: str | torch.device,
                   dtype: torch.dtype) -> nn.Module:
    """Fill the meta-built `net` from `state` (keys and shapes already checked by the caller's picker):
    each tensor moved to `device` in `dtype` becomes the parameter itself (no second copy). The DAC-style
    codecs (DAC, Higgs', X-Codec) load through it."""
    net.load_state_dict({k: v.to(device=device, dtype=dtype) for k, v in state.items()}, strict=True,
                        assign=True)
    return net


def fold_weight_norm(g: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """weight = g * v / ||v|| with the norm over every dim but 0 (torch weight_norm's dim=0)."""
    norm = v.norm(dim=tuple(range(1, v.dim())), keepdim=True)
    return v * (g / norm)


SHARD_BYTES = 1 << 30


def save_weights(sd: dict[str, torch.Tensor], out: Path, shard_bytes: int = SHARD_BYTES) -> None:
    """model.safetensors, or (past `shard_bytes`) shards of about that size + model.safetensors.index.json as
    the hub writes them: safetensors serialises a whole file in memory, so a real-size checkpoint written
    in one piece would need its size twice over."""
    total = sum(v.numel() * v.element_size() for v in sd.values())
    if total <= shard_bytes:
        save_file(
            {k: v.contiguous() for k, v in sd.items()},
            str(out / "model.safetensors"),
            metadata={"format": "pt"},
        )
        return
    shards: list[list[str]] = [[]]
    size = 0
    for k, v in sd.items():
        if size and size + v.numel() * v.element_size() > shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(k)
        size += v.numel() * v.element_size()
    weight_map = {}
    for i, keys in enumerate(shards):
        name = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file({k: sd[k].contiguous() for k in keys}, str(out / name), metadata={"format": "pt"})
        weight_map.update({k: name for k in keys})
    (out / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2)
    )
