"""A SNAC folder's weights -> the decoder, strictly: weight norm (stored as
`parametrizations.weight.original0/1`) folded into plain weights, every decoder tensor checked."""

from __future__ import annotations

from pathlib import Path

import torch

from ...base import CheckpointError
from ...weights import fold_weight_norm
from .config import SnacConfig
from .model import SnacDecoder


def load_snac(root: Path, device: torch.device, dtype: torch.dtype) -> SnacDecoder:
    """A SNAC folder (config.json + pytorch_model.bin, or model.safetensors) -> the decoder, strictly: every
    decoder / quantizer-output tensor present with its shape (weight-norm pairs folded); the encoder half
    and the input projections are ignored."""
    cfg = SnacConfig.read(root / "config.json")
    with torch.device("meta"):
        net = SnacDecoder(cfg)
    state = _read(root)
    want = net.state_dict()
    out: dict[str, torch.Tensor] = {}
    for k, ref in want.items():
        if k in state:
            t = state[k]
        elif k.endswith(".weight") and k[:-6] + "parametrizations.weight.original0" in state:
            base = k[:-6] + "parametrizations.weight."
            if base + "original1" not in state:
                raise CheckpointError(f"SNAC checkpoint in {root}: tensor {base + 'original1'!r} is missing")
            t = fold_weight_norm(state[base + "original0"].float(), state[base + "original1"].float())
        else:
            raise CheckpointError(
                f"SNAC checkpoint in {root}: tensor {k!r} (shape {list(ref.shape)}) is missing"
            )
        if tuple(t.shape) != tuple(ref.shape):
            raise CheckpointError(
                f"SNAC checkpoint in {root}: tensor {k!r} has shape {list(t.shape)}, its "
                f"config.json needs {list(ref.shape)}"
            )
        if t.is_floating_point() and not torch.isfinite(t).all():
            raise CheckpointError(f"SNAC checkpoint in {root}: tensor {k!r} holds NaN or inf values")
        out[k] = t.to(device=device, dtype=dtype)
    net.load_state_dict(out, strict=True, assign=True)
    return net.eval()


def _read(root: Path) -> dict[str, torch.Tensor]:
    st, pt = root / "model.safetensors", root / "pytorch_model.bin"
    if st.exists():
        from safetensors.torch import load_file

        return load_file(str(st))
    if not pt.exists():
        raise CheckpointError(f"SNAC codec folder {root} has neither pytorch_model.bin nor model.safetensors")
    try:
        sd = torch.load(str(pt), map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises many kinds for a bad pickle
        raise CheckpointError(f"cannot read {pt} (corrupt or not a state dict?): {e}") from None
    if not isinstance(sd, dict):
        raise CheckpointError(f"{pt} does not hold a state dict")
    return sd
