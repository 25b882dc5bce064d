"""Shared by every family: finding a checkpoint (local directory or Hugging Face hub id) and loading its
safetensors strictly.

Loading reads each tensor straight from the file into its parameter (`fill_module`): the module is built
on the meta device, every parameter is allocated once in the target dtype on the target device, and the
file's bytes are read into it (same dtype, on the CPU: no intermediate copy at all; otherwise through a
bounded staging buffer that converts or moves CHUNK_BYTES at a time). Nothing is memory-mapped, so the
peak resident size is the weights in the target dtype plus one staging buffer, not file + copy + cast.

Loading never downloads: a hub id must already be in the local hub cache (`vox models pull ID` puts it
there). Every mismatch between the file and the architecture is a CheckpointError that names the
tensor and the checkpoint path.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .base import CheckpointError
from .device_memory import device_free

# Finding a checkpoint needs no torch (`vox voices` reads config.json alone): it lives in locate.py.
from .locate import cached_snapshot, looks_like_hub_id, offline_note, read_json, resolve  # noqa: F401


def _safetensor_files(root: Path) -> list[Path]:
    index = root / "model.safetensors.index.json"
    if index.exists():
        names = sorted(set(read_json(index)["weight_map"].values()))
        return [root / n for n in names]
    single = root / "model.safetensors"
    if single.exists():
        return [single]
    raise CheckpointError(f"{root} has no model.safetensors (or model.safetensors.index.json)")


def check_state_dict(
    module: nn.Module,
    sd: dict[str, Any],
    where: Path | str,
    ignore_prefixes: tuple[str, ...] = (),
    prefix: str = "",
) -> None:
    """Keys and shapes must match exactly (tensors or anything with a `.shape`). `sd` is keyed like
    `module.state_dict()`; `prefix` is what the keys carry in the file, so messages name the real key.
    The one strict-loading rule of the package: the talker and the audio modules both go through it."""
    expected = {k: tuple(v.shape) for k, v in module.state_dict().items()}
    for k, shape in expected.items():
        if k not in sd:
            raise CheckpointError(
                f"checkpoint {where}: tensor {prefix + k!r} (shape {list(shape)}) is missing"
            )
        got = tuple(sd[k].shape)
        if got != shape:
            raise CheckpointError(
                f"checkpoint {where}: tensor {prefix + k!r} has shape {list(got)}, "
                f"the architecture in config.json needs {list(shape)}"
            )
    extra = sorted(k for k in sd if k not in expected and not k.startswith(ignore_prefixes))
    if extra:
        raise CheckpointError(
            f"checkpoint {where} has unexpected tensor {prefix + extra[0]!r}"
            + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else "")
            + "; config.json does not describe these weights"
        )


# --- reading safetensors straight into parameters -------------------------------------------------------
CHUNK_BYTES = 64 << 20  # staging buffer for a tensor whose dtype or device differs from the file's
_MAX_HEADER = 100 << 20
_ST_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
              "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
              "BOOL": torch.bool}


@dataclass(frozen=True)
class TensorEntry:
    """Where one tensor's bytes are in a safetensors file (from its header; nothing read yet)."""

    file: Path
    dtype: torch.dtype
    shape: tuple[int, ...]
    offset: int  # absolute byte offset of the data in `file`
    nbytes: int


def read_header(file: Path) -> dict[str, TensorEntry]:
    """The tensor table of one safetensors file; a CheckpointError for a missing, truncated or corrupt one."""
    try:
        size = file.stat().st_size
        with open(file, "rb") as f:
            head = f.read(8)
            n = int.from_bytes(head, "little") if len(head) == 8 else -1
            if not 0 < n <= min(size - 8, _MAX_HEADER):
                raise CheckpointError(f"cannot read {file}: not a safetensors file (corrupt or truncated)")
            header = json.loads(f.read(n))
    except FileNotFoundError:
        raise CheckpointError(f"{file} is missing; the checkpoint is incomplete") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"cannot read {file} (corrupt or truncated safetensors file?): {e}") from None
    entries: dict[str, TensorEntry] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = _ST_DTYPES[info["dtype"]]
            shape = tuple(int(x) for x in info["shape"])
            begin, end = (int(x) for x in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise CheckpointError(f"cannot read {file}: tensor {name!r} has an unreadable header entry "
                                  f"({info!r})") from None
        numel = 1
        for d in shape:
            numel *= d
        itemsize = torch.empty((), dtype=dtype, device="meta").element_size()
        if end - begin != numel * itemsize or 8 + n + end > size:
            raise CheckpointError(f"cannot read {file}: tensor {name!r} lies outside the file "
                                  "(corrupt or truncated safetensors file?)")
        entries[name] = TensorEntry(file, dtype, shape, 8 + n + begin, end - begin)
    return entries


def checkpoint_entries(root: Path) -> dict[str, TensorEntry]:
    """Every tensor of the checkpoint at `root` (one model.safetensors or the shards of its index)."""
    entries: dict[str, TensorEntry] = {}
    for f in _safetensor_files(root):
        entries.update(read_header(f))
    return entries


def _read_exact(f: Any, buf: memoryview, file: Path) -> None:
    done = 0
    while done < len(buf):
        got = f.readinto(buf[done:])
        if not got:
            raise CheckpointError(f"cannot read {file}: it ends early (truncated safetensors file?)")
        done += got


def _bytes_of(t: torch.Tensor) -> memoryview:
    """A writable byte view of a contiguous CPU tensor's storage."""
    return memoryview(t.reshape(-1).view(torch.uint8).numpy()).cast("B")


def read_tensor_into(f: Any, entry: TensorEntry, out: torch.Tensor) -> None:
    """Fill `out` (contiguous, the entry's shape) from the open file `f`, converting dtype/device."""
    f.seek(entry.offset)
    if out.dtype == entry.dtype and out.device.type == "cpu":
        _read_exact(f, _bytes_of(out), entry.file)
        return
    flat = out.reshape(-1)
    itemsize = flat.element_size() if out.dtype == entry.dtype else \
        torch.empty((), dtype=entry.dtype, device="meta").element_size()
    step = max(1, CHUNK_BYTES // itemsize)
    stage = torch.empty(min(step, flat.numel()), dtype=entry.dtype)
    for i in range(0, flat.numel(), step):
        part = stage[: min(step, flat.numel() - i)]
        _read_exact(f, _bytes_of(part), entry.file)
        flat[i : i + part.numel()].copy_(part)


def read_state_dict(root: Path) -> dict[str, torch.Tensor]:
    """Every tensor of the checkpoint at `root`, read once in the file's dtype on the CPU. For layouts whose
    keys must be split or joined before they match a module (Higgs' boson layout); a layout that matches
    its module as stored, or after renaming its keys, should use `fill_module`, which needs no dict."""
    return read_entries(checkpoint_entries(root), root)


def read_entries(entries: dict[str, TensorEntry], root: Path | str) -> dict[str, torch.Tensor]:
    """The tensors of `entries` (a part of `checkpoint_entries`), read in the file's dtype on the CPU."""
    out: dict[str, torch.Tensor] = {}
    handles: dict[Path, Any] = {}
    try:
        for name, e in entries.items():
            if e.file not in handles:
                handles[e.file] = open(e.file, "rb", buffering=0)  # noqa: SIM115 - closed below
            t = torch.empty(e.shape, dtype=e.dtype)
            read_tensor_into(handles[e.file], e, t)
            out[name] = t
    except OSError as e:
        raise CheckpointError(f"cannot read the weights of {root}: {e}") from None
    finally:
        for h in handles.values():
            h.close()
    return out


def _check_fits(module: nn.Module, own: dict[str, TensorEntry], where: Path | str, device: torch.device,
                dtype: torch.dtype) -> None:
    """One sentence before allocating when the weights cannot fit in what `device` has free."""
    keys = set(module.state_dict())
    total = sum(e.nbytes // e.dtype.itemsize * (dtype if e.dtype.is_floating_point else e.dtype).itemsize
                for name, e in own.items() if name in keys)
    free = device_free(device)
    if free is not None and total > free:
        what = "free on the GPU" if device.type == "cuda" else "available RAM"
        raise CheckpointError(f"the weights of {where} need {total / 1e9:.2f} GB in {str(dtype)[6:]} but "
                              f"only {free / 1e9:.2f} GB is {what}; free memory or load in bfloat16 "
                              "(--dtype)")


def fill_module(
    module: nn.Module,
    entries: dict[str, TensorEntry],
    where: Path | str,
    device: str | torch.device,
    dtype: torch.dtype,
    prefix: str = "",
    ignore_prefixes: tuple[str, ...] = (),
    check_finite: bool = False,
) -> None:
    """Materialise a meta-built `module` from `entries` (keys `prefix + name`): keys and shapes checked
    strictly first (`check_state_dict`), then every tensor allocated once on `device` (floating ones in
    `dtype`, the rest in the file's) and read straight into; `check_finite` refuses NaN/inf values."""
    own = {k[len(prefix):]: e for k, e in entries.items() if k.startswith(prefix)}
    check_state_dict(module, own, where, ignore_prefixes, prefix)
    device = torch.device(device)
    _check_fits(module, own, where, device, dtype)
    loaded: dict[str, torch.Tensor] = {}
    handles: dict[Path, Any] = {}
    try:
        for name in module.state_dict():
            e = own[name]
            t = torch.empty(e.shape, dtype=dtype if e.dtype.is_floating_point else e.dtype, device=device)
            if e.file not in handles:
                handles[e.file] = open(e.file, "rb", buffering=0)  # noqa: SIM115 - closed below
            read_tensor_into(handles[e.file], e, t)
            if check_finite and t.is_floating_point() and not torch.isfinite(t).all():
                raise CheckpointError(f"tensor '{prefix + name}' in {e.file} holds NaN or inf values")
            loaded[name] = t
    except OSError as e:
        raise CheckpointError(f"cannot read the weights of {where}: {e}") from None
    finally:
        for h in handles.values():
            h.close()
    module.load_state_dict(loaded, strict=True, assign=True)
    left = [n for n, t in [*module.named_parameters(), *module.named_buffers()] if t.is_meta]
    if left:
        raise RuntimeError(f"fill_module left {left[0]!r} on the meta device (not in the state dict)")
