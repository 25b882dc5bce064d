"""Shared by every family: finding a checkpoint (local directory or Hugging Face hub id) and loading its
safetensors strictly.

Loading never downloads: a hub id must already be in the local hub cache (`vox models pull ID` puts it
there). Every mismatch between the file and the architecture is a CheckpointError that names the
tensor and the checkpoint path.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .base import CheckpointError


def looks_like_hub_id(source: str) -> bool:
    return source.count("/") == 1 and not source.startswith((".", "/", "~")) and not Path(source).exists()


def resolve(source: str) -> Path:
    """A local directory, or the cached snapshot of a hub id. Raises CheckpointError saying how to get it."""
    p = Path(source).expanduser()
    if p.is_dir():
        if not (p / "config.json").exists():
            raise CheckpointError(f"{p} has no config.json; point at a model checkpoint directory "
                                  "(see vox models)")
        return p
    if not looks_like_hub_id(source):
        raise CheckpointError(
            f"checkpoint {source!r} not found: give an existing local directory or a hub id "
            "(owner/name; see vox models)"
        )
    snap = cached_snapshot(source)
    if snap is None:
        raise CheckpointError(
            f"model {source!r} is not in the local Hugging Face cache{offline_note()}; download it with "
            f"`vox models pull {source}` or pass a local checkpoint directory"
        )
    return snap


def cached_snapshot(repo_id: str, marker: str = "config.json") -> Path | None:
    """The local hub-cache snapshot of `repo_id` holding `marker`, or None. Never downloads."""
    from huggingface_hub import snapshot_download

    try:
        snap = snapshot_download(repo_id=repo_id, local_files_only=True)
    except Exception:  # noqa: BLE001 - every failure here means "not in the local cache"
        return None
    return Path(snap) if (Path(snap) / marker).exists() else None


def offline_note() -> str:
    return " (HF_HUB_OFFLINE=1)" if os.environ.get("HF_HUB_OFFLINE") == "1" else ""


def read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing; the checkpoint is incomplete") from None
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path} is not valid JSON ({e})") from None


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
