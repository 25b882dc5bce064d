"""Shared by every family: finding a checkpoint (local directory or Hugging Face hub id) and loading its
safetensors strictly.

Loading never downloads: a hub id must already be in the local hub cache (`vox models pull ID` puts it
there). Every mismatch between the file and the architecture is a CheckpointError that names the
tensor and the checkpoint path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from .base import CheckpointError

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


def read_state_dict(root: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    sd: dict[str, torch.Tensor] = {}
    for f in _safetensor_files(root):
        if not f.exists():
            raise CheckpointError(f"{f} is missing; the checkpoint is incomplete")
        sd.update(load_file(str(f)))
    return sd


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


def load_weights(
    module: nn.Module, sd: dict[str, torch.Tensor], where: Path | str, ignore_prefixes: tuple[str, ...] = ()
) -> None:
    check_state_dict(module, sd, where, ignore_prefixes)
    own = module.state_dict()
    module.load_state_dict({k: sd[k] for k in own}, strict=True, assign=False)
