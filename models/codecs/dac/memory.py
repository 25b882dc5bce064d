"""The DAC's device memory, from its config alone (nothing allocated): a codec slot (its decoder's
streaming state shapes, built on the meta device), its weights, and the largest activation of its decoder
per frame (meta-device forward of one chunk) four times over. Dia and Zonos plan their memory with it."""

from __future__ import annotations

import math

import torch

from .config import DacCodecConfig
from .layers import DacNet

_PROBE_FRAMES = 12


def dac_costs(cfg: DacCodecConfig, dtype: torch.dtype) -> tuple[int, int, int]:
    """(bytes per codec slot, peak activation bytes per frame, weight bytes) of the DAC in `dtype`."""
    e = torch.empty((), dtype=dtype, device="meta").element_size()
    with torch.device("meta"):
        net = DacNet(cfg)
    slot = sum(math.prod(s) * e for s in net.decoder_state_shapes().values())
    peak = [0]

    def hook(_m: torch.nn.Module, _i: object, out: object) -> None:
        if isinstance(out, torch.Tensor):
            peak[0] = max(peak[0], out.numel())

    handles = [m.register_forward_hook(hook) for m in net.decoder.modules()]
    try:
        with torch.no_grad():
            net.decoder(torch.zeros(1, cfg.hidden_size, _PROBE_FRAMES, device="meta"))
    finally:
        for h in handles:
            h.remove()
    return slot, 4 * e * -(-peak[0] // _PROBE_FRAMES), sum(p.numel() for p in net.parameters()) * e
