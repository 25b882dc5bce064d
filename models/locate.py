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


def locate_component(name: str, root: Path, what: str, folder: str | None = None,
                     need: str = "config.json", fetch_hint: str | None = None) -> Path:
    """A part a checkpoint names (Higgs' audio tokenizer, Dia's codec, a SpeechLM codec...) found the way
    transformers finds it, in this order: `name` as a path when it is an existing folder (what
    `save_pretrained` writes for a part loaded from disk), `name` inside the checkpoint `root`, the
    checkpoint's own `folder` for it, then `name`'s snapshot in the local hub cache. Never downloads. The
    error lists every place tried. `need`: the file a named folder must hold."""
    tried: list[str] = []

    def usable(p: Path, own: bool = False) -> bool:
        tried.append(str(p))
        return p.is_dir() and (own or (p / need).exists())  # the checkpoint's own folder is what it is

    given = Path(name).expanduser()
    for p in dict.fromkeys([given] if given.is_absolute() else [given, root / given]):  # in order, once each
        if usable(p):
            return p
    if folder is not None and usable(root / folder, own=True):
        return root / folder
    if looks_like_hub_id(name):
        tried.append(f"the Hugging Face cache ({name})")
        snap = cached_snapshot(name, need)
        if snap is not None:
            return snap
    get = fetch_hint or (f"download it with `vox models pull {name}`" if looks_like_hub_id(name) else
                         "point the checkpoint at an existing folder")
    where = f" or put its folder at {root / folder}" if folder is not None else ""
    found = ("is not a folder here and not in the local Hugging Face cache" if looks_like_hub_id(name) else
             "is not a folder here")
    raise CheckpointError(f"{what} {name!r} {found}{offline_note()} (tried {'; '.join(tried)}: a folder "
                          f"holding {need}); {get}{where}")


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
