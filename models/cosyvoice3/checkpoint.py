"""Finding and strictly loading a CosyVoice 3 checkpoint (upstream's layout, not transformers'):

    cosyvoice3.yaml, llm.pt, flow.pt, hift.pt        required
    CosyVoice-BlankEN/ (config.json + tokenizer)     required (its Qwen2 weights are overwritten by llm.pt)
    spk2info.pt                                      optional: zero-shot speakers (add_zero_shot_spk)
    campplus.onnx, speech_tokenizer_v3.onnx          optional: only voice cloning reads them

A hub id must already be in the local Hugging Face cache (never downloads). Every mismatch names the
tensor and the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..base import CheckpointError
from ..checkpoint import cached_snapshot, check_state_dict, looks_like_hub_id, offline_note
from .config import QWEN_DIR, YAML

HUB_ID = "FunAudioLLM/Fun-CosyVoice3-0.5B-2512"
REQUIRED = (YAML, "llm.pt", "flow.pt", "hift.pt", f"{QWEN_DIR}/config.json")


def is_cosyvoice3(path: Path) -> bool:
    return (path / YAML).is_file()


def resolve(source: str, yaml: str = YAML, family: str = "CosyVoice 3") -> Path:
    """The checkpoint folder of `source` (a folder or a cached hub id), its files checked (`yaml`/`family`:
    CosyVoice 2's program resolves its own layout here)."""
    required = (yaml, *REQUIRED[1:])
    p = Path(source).expanduser()
    if p.is_dir():
        root = p
    elif looks_like_hub_id(source):
        snap = cached_snapshot(source, need=yaml)
        if snap is None:
            raise CheckpointError(
                f"model {source!r} is not in the local Hugging Face cache{offline_note()}; "
                f"download it with `vox models pull {source}` or pass a local folder"
            )
        root = snap
    else:
        raise CheckpointError(
            f"checkpoint {source!r} not found: give an existing local directory or a hub id"
        )
    for rel in required:
        if not (root / rel).exists():
            raise CheckpointError(
                f"{root / rel} is missing; a {family} checkpoint needs {', '.join(required)}"
            )
    return root


def read_pt(path: Path) -> Any:
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing; the checkpoint is incomplete") from None
    except Exception as e:  # noqa: BLE001 - a corrupt or non-tensor pickle: name the file
        raise CheckpointError(
            f"{path} cannot be read as a torch state dict ({type(e).__name__}: {e})"
        ) from None


def load_module(
    module: nn.Module,
    sd: dict[str, torch.Tensor],
    path: Path,
    device: torch.device,
    dtype: torch.dtype,
    float64_children: tuple[str, ...] = (),
) -> nn.Module:
    """Materialise a meta-built module from `sd` (keys and shapes exactly as the module's); the named
    children stay in float64 (upstream runs HiFT's f0 predictor in float64)."""
    if not isinstance(sd, dict):
        raise CheckpointError(f"{path} does not hold a state dict")
    check_state_dict(module, sd, path)
    own = {k: v for k, v in module.state_dict().items() if v.device.type != "meta"}  # computed buffers
    module.to_empty(device=device)
    module.to(dtype)
    for name in float64_children:
        getattr(module, name).double()
    module.load_state_dict({**own, **sd}, strict=True)
    return module.eval()
