"""Load one safetensors file into a module built on the meta device, strictly: the key/shape rule is
`checkpoint.check_state_dict` (shared with the talker); this adds reading only the module's prefix of
one file and refusing NaN/inf values; each tensor is read straight into its parameter (fill_module).
Every failure is a CheckpointError naming the key and the file."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from ..base import CheckpointError
from ..checkpoint import fill_module, read_header


def load_checked(
    module: nn.Module, file: Path, prefix: str, device: str | torch.device, dtype: torch.dtype
) -> None:
    """Fill `module` (typically on meta) from the keys `prefix + name` of `file`, cast to `dtype`."""
    if not file.exists():
        raise CheckpointError(f"missing weights file {file}")
    fill_module(module, read_header(file), file, device, dtype, prefix=prefix, check_finite=True)
