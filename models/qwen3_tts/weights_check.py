"""Load one safetensors file into a module built on the meta device, strictly: every parameter the
module has must be present with the same shape, and no unknown tensor may sit under its prefix.
Every failure is a CheckpointError that names the tensor key and the file."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from torch import nn

from ..base import CheckpointError


def load_checked(
    module: nn.Module, file: Path, prefix: str, device: str | torch.device, dtype: torch.dtype
) -> None:
    """Fill `module` (typically on meta) from the keys `prefix + name` of `file`, cast to `dtype`."""
    if not file.exists():
        raise CheckpointError(f"missing weights file {file}")
    expected = module.state_dict()
    try:
        with safe_open(str(file), framework="pt", device="cpu") as f:
            present = set(f.keys())
            missing = [prefix + k for k in expected if prefix + k not in present]
            if missing:
                more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
                raise CheckpointError(f"tensor '{missing[0]}'{more} is missing from {file}")
            unexpected = sorted(
                k for k in present if k.startswith(prefix) and k[len(prefix) :] not in expected
            )
            if unexpected:
                raise CheckpointError(
                    f"unexpected tensor '{unexpected[0]}' in {file}: the checkpoint does not "
                    "match this architecture (config.json and weights disagree?)"
                )
            loaded: dict[str, torch.Tensor] = {}
            for name, ref in expected.items():
                t = f.get_tensor(prefix + name)
                if tuple(t.shape) != tuple(ref.shape):
                    raise CheckpointError(
                        f"tensor '{prefix + name}' in {file} has shape {tuple(t.shape)}, "
                        f"expected {tuple(ref.shape)} from config.json"
                    )
                if not torch.isfinite(t).all():
                    raise CheckpointError(f"tensor '{prefix + name}' in {file} holds NaN or inf values")
                loaded[name] = t.to(device=device, dtype=dtype if t.is_floating_point() else t.dtype)
    except SafetensorError as e:
        raise CheckpointError(f"cannot read {file} (corrupt or truncated safetensors file?): {e}") from e
    module.load_state_dict(loaded, strict=True, assign=True)
