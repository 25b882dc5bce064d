"""Loading a Dia checkpoint strictly (finding it is the shared `models/checkpoint.resolve`).

The transformers layout (hub `nari-labs/Dia-1.6B-0626`): config.json (model_type "dia"),
model.safetensors or model.safetensors.index.json + shards, generation_config.json, tokenizer/processor
files (the tokenizer is byte-level, so nothing in them is needed). Loading never downloads.
"""

from __future__ import annotations

from pathlib import Path

import torch

from ..checkpoint import checkpoint_entries, fill_module, read_json, resolve
from ..codecs.dac.codec import DAC_HUB_ID
from ..locate import locate_component

__all__ = ["resolve", "read_json", "load_strict", "resolve_codec"]


def load_strict(module: torch.nn.Module, root: Path, device: torch.device, dtype: torch.dtype) -> None:
    """Materialise a meta-built module from the checkpoint: every key present with its shape, none extra
    (messages name the tensor and the checkpoint path); each tensor is read straight into its parameter."""
    fill_module(module, checkpoint_entries(root), root, device, dtype)


def resolve_codec(dia_root: Path) -> Path:
    """The codec folder for a Dia checkpoint: `dia_root/codec` when present (tests, the demo), else the
    local hub cache snapshot of descript/dac_44khz (models/locate.py: the error lists what was tried).
    Never downloads."""
    return locate_component(DAC_HUB_ID, Path(dia_root), "the DAC codec that Dia decodes with", folder="codec")
