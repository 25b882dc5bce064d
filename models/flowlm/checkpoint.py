"""Finding and strictly loading a checkpoint in upstream's CosyVoice layout (not transformers'):

    cosyvoice3.yaml (cosyvoice2.yaml), llm.pt, flow.pt, hift.pt     required
    CosyVoice-BlankEN/ (config.json + tokenizer)     required (its Qwen2 weights are overwritten by llm.pt)
    spk2info.pt                                      optional: zero-shot speakers (add_zero_shot_spk)
    campplus.onnx, speech_tokenizer_v3.onnx (v2)     optional: only voice cloning reads them

A hub id must already be in the local Hugging Face cache (never downloads). Every mismatch names the
tensor and the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..base import CheckpointError
from ..checkpoint import cached_snapshot, check_state_dict, looks_like_hub_id, offline_note
from ..codecs.hift.parts import fold_weight_norm
from ..dtypes import DtypePolicy
from .config import QWEN_DIR

REQUIRED = ("llm.pt", "flow.pt", "hift.pt", f"{QWEN_DIR}/config.json")  # beside the family's yaml


def resolve(source: str, yaml: str, family: str) -> Path:
    """The checkpoint folder of `source` (a folder or a cached hub id), its files checked: the family's
    `yaml` (its name tells the generations apart) and REQUIRED."""
    required = (yaml, *REQUIRED)
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
    child_dtypes: Mapping[str, torch.dtype] | None = None,
) -> nn.Module:
    """Materialise a meta-built module from `sd` (keys and shapes exactly as the module's) in `dtype`, the
    children named in `child_dtypes` in theirs (upstream runs HiFT's f0 predictor in float64)."""
    if not isinstance(sd, dict):
        raise CheckpointError(f"{path} does not hold a state dict")
    check_state_dict(module, sd, path)
    own = {k: v for k, v in module.state_dict().items() if v.device.type != "meta"}  # computed buffers
    module.to_empty(device=device)
    module.to(dtype)
    for name, child_dtype in (child_dtypes or {}).items():
        getattr(module, name).to(child_dtype)
    module.load_state_dict({**own, **sd}, strict=True)
    return module.eval()


def load_weights(
    root: Path,
    lm: nn.Module,
    flow: nn.Module,
    hift: nn.Module,
    device: torch.device,
    policy: DtypePolicy,
    dtype: str,
    vocoder_children: tuple[str, ...] = (),
) -> None:
    """Fill the meta-built LM, flow and vocoder from llm.pt, flow.pt and hift.pt, each in the dtype the
    family's `policy` gives its part ("lm", "flow", "vocoder") for `dtype`; the vocoder's children named
    in `vocoder_children` are parts of the policy of their own (CosyVoice 3's f0 predictor)."""
    load_module(lm, read_pt(root / "llm.pt"), root / "llm.pt", device, policy.torch_dtype("lm", dtype))
    load_module(flow, read_pt(root / "flow.pt"), root / "flow.pt", device, policy.torch_dtype("flow", dtype))
    vocoder = policy.torch_dtype("vocoder", dtype)
    children = {name: policy.torch_dtype(name, dtype) for name in vocoder_children}
    hsd = read_pt(root / "hift.pt")
    if isinstance(hsd, dict):  # upstream strips a HiFiGan wrapper's `generator.` prefix the same way
        hsd = fold_weight_norm({k.replace("generator.", ""): v for k, v in hsd.items()}, vocoder,
                               {f"{name}.": dt for name, dt in children.items()})
    load_module(hift, hsd, root / "hift.pt", device, vocoder, child_dtypes=children)
