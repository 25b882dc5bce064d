"""Load one safetensors file into a module built on the meta device, strictly: the key/shape rule is
`checkpoint.check_state_dict` (shared with the talker); this adds reading only the module's prefix of
one file and refusing NaN/inf values. Every failure is a CheckpointError naming the key and the file."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch
from safetensors import SafetensorError, safe_open
from torch import nn

from ..base import CheckpointError
from ..checkpoint import check_state_dict


def load_checked(
    module: nn.Module, file: Path, prefix: str, device: str | torch.device, dtype: torch.dtype
) -> None:
    """Fill `module` (typically on meta) from the keys `prefix + name` of `file`, cast to `dtype`."""
    if not file.exists():
        raise CheckpointError(f"missing weights file {file}")
    try:
        with safe_open(str(file), framework="pt", device="cpu") as f:
            # shapes first (no tensor is read before the layout is known to match)
            shapes = {
                k[len(prefix):]: SimpleNamespace(shape=tuple(f.get_slice(k).get_shape()))
                for k in f.keys()
                if k.startswith(prefix)
            }
            check_state_dict(module, shapes, file, prefix=prefix)
            loaded: dict[str, torch.Tensor] = {}
            for name in module.state_dict():
                t = f.get_tensor(prefix + name)
                if not torch.isfinite(t).all():
                    raise CheckpointError(f"tensor '{prefix + name}' in {file} holds NaN or inf values")
                loaded[name] = t.to(device=device, dtype=dtype if t.is_floating_point() else t.dtype)
    except SafetensorError as e:
        raise CheckpointError(f"cannot read {file} (corrupt or truncated safetensors file?): {e}") from e
    module.load_state_dict(loaded, strict=True, assign=True)
