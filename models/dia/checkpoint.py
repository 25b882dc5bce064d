"""Finding a Dia checkpoint (local directory or hub id in the local cache) and loading it strictly.

The transformers layout (hub `nari-labs/Dia-1.6B-0626`): config.json (model_type "dia"),
model.safetensors or model.safetensors.index.json + shards, generation_config.json, tokenizer/processor
files (the tokenizer is byte-level, so nothing in them is needed). Loading never downloads.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

from ..base import CheckpointError
from ..qwen3_tts.checkpoint import check_state_dict, looks_like_hub_id, read_json, read_state_dict

__all__ = ["resolve", "read_json", "read_state_dict", "load_strict"]

EXAMPLE = "nari-labs/Dia-1.6B-0626"


def resolve(source: str) -> Path:
    p = Path(source).expanduser()
    if p.is_dir():
        if not (p / "config.json").exists():
            raise CheckpointError(f"{p} has no config.json; point at a Dia checkpoint directory")
        return p
    if not looks_like_hub_id(source):
        raise CheckpointError(
            f"checkpoint {source!r} not found: give an existing local directory or a hub id such as {EXAMPLE}"
        )
    from huggingface_hub import snapshot_download

    try:
        snap = snapshot_download(repo_id=source, local_files_only=True)
    except Exception:  # noqa: BLE001 - every failure here means "not in the local cache"
        snap = None
    if snap is None or not (Path(snap) / "config.json").exists():
        offline = os.environ.get("HF_HUB_OFFLINE") == "1"
        raise CheckpointError(
            f"model {source!r} is not in the local Hugging Face cache"
            + (" (HF_HUB_OFFLINE=1)" if offline else "")
            + f"; download it with `vox models pull {source}` or pass a local checkpoint directory"
        )
    return Path(snap)


def load_strict(module: torch.nn.Module, root: Path, device: torch.device, dtype: torch.dtype) -> None:
    """Materialise a meta-built module from the checkpoint: every key present with its shape, none extra
    (messages name the tensor and the checkpoint path)."""
    sd = read_state_dict(root)
    check_state_dict(module, sd, root)
    module.to_empty(device=device)
    module.load_state_dict({k: v.to(dtype) for k, v in sd.items()}, strict=True)
    module.to(dtype)
