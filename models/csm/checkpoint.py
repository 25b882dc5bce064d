"""Which files of a CSM folder hold the weights: the transformers layout of `sesame/csm-1b`
(`transformers-0000N-of-0000M.safetensors` + `transformers.safetensors.index.json`, 538 tensors with the
codec's `codec_model.*`), or the same layout saved by `save_pretrained` (`model*.safetensors`). The
repository's `model.safetensors` / `ckpt.pt` hold the original Sesame weights under other names and another
q/k rotary order: a folder holding only those is refused in one sentence, never half-loaded."""

from __future__ import annotations

from pathlib import Path

from ..base import CheckpointError
from ..checkpoint import TensorEntry, read_header
from ..locate import read_json

INDEX = "transformers.safetensors.index.json"
BACKBONE_KEY = "backbone_model.norm.weight"  # a tensor every transformers-layout file set has


def _shards(root: Path, index: Path) -> list[Path]:
    weight_map = read_json(index).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise CheckpointError(f"{index} has no weight_map")
    return [root / n for n in sorted(set(weight_map.values()))]


def _read(files: list[Path]) -> dict[str, TensorEntry]:
    entries: dict[str, TensorEntry] = {}
    for f in files:
        entries.update(read_header(f))
    return entries


def csm_entries(root: Path) -> dict[str, TensorEntry]:
    """The tensor table of the transformers-layout weights in `root` (CheckpointError otherwise)."""
    if (root / INDEX).exists():
        return _read(_shards(root, root / INDEX))
    if (root / "model.safetensors.index.json").exists():
        entries = _read(_shards(root, root / "model.safetensors.index.json"))
    elif (root / "model.safetensors").exists():
        entries = read_header(root / "model.safetensors")
    elif (root / "ckpt.pt").exists():
        entries = {}
    else:
        raise CheckpointError(
            f"{root} holds no CSM weights: expected {INDEX} and its transformers-*.safetensors "
            "shards (the transformers layout of sesame/csm-1b)"
        )
    if BACKBONE_KEY not in entries:
        raise CheckpointError(
            f"{root} holds only the original Sesame weights (model.safetensors / ckpt.pt, "
            f"other tensor names and rotary order); load the transformers layout instead: "
            f"{INDEX} with its transformers-0000N-of-0000M.safetensors shards, as sesame/csm-1b "
            "ships them"
        )
    return entries
