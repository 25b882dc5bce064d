"""Finding a checkpoint (a local directory or a cached Hugging Face hub id) and reading its JSON files.
Imports nothing heavy (no torch, no safetensors), so commands that only read a checkpoint's config
(`vox voices`) start fast; models/checkpoint.py re-exports these for the loaders.

Loading never downloads: a hub id must already be in the local hub cache (`vox models pull ID`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

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
        what = "is not a directory" if p.exists() else "does not exist"
        raise CheckpointError(
            f"checkpoint folder {source} {what}: give an existing local directory or a hub id "
            "(owner/name; see vox models)"
        )
    snap = cached_snapshot(source)
    if snap is None:
        raise CheckpointError(
            f"model {source!r} is not in the local Hugging Face cache{offline_note()}; download it with "
            f"`vox models pull {source}` or pass a local checkpoint directory"
        )
    return snap


def cached_snapshot(repo_id: str, need: str = "config.json") -> Path | None:
    """The local hub-cache snapshot of `repo_id` holding `need`, or None. Never downloads."""
    from huggingface_hub import snapshot_download

    try:
        snap = snapshot_download(repo_id=repo_id, local_files_only=True)
    except Exception:  # noqa: BLE001 - every failure here means "not in the local cache"
        return None
    return Path(snap) if (Path(snap) / need).exists() else None


def offline_note() -> str:
    return " (HF_HUB_OFFLINE=1)" if os.environ.get("HF_HUB_OFFLINE") == "1" else ""


def read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing; the checkpoint is incomplete") from None
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{path} is not valid JSON ({e})") from None
