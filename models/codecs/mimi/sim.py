"""Mimi's decode cost on a simulated GPU, from arithmetic on its sizes: CSM and Kyutai TTS ship the same
released decoder, so their profiles compute its cost here (derivation in models/csm/sim.py's docstring).

Per 1920-sample frame: the codebook sum's output projection, the depthwise upsample to 25 Hz, the
transformer over 2 positions, then the SEANet decoder's transposed convolutions and residual units at each
rate; activations counted at bf16.
"""

from __future__ import annotations

from typing import Any

from ...sim_priors import BYTES_BF16, KERNELS_PER_LAYER

CODEC_KERNELS = (
    8 * KERNELS_PER_LAYER + 40
)  # the transformer, then RVQ, upsample, SEANet convs, gather/scatter


def codec_frame_cost(c: dict[str, Any]) -> tuple[float, float]:
    """(FLOPs, activation bytes) to decode one 12.5 Hz frame with Mimi's decoder of sizes `c` (a family's
    declared `codec` sizes: hidden, layers, mlp, window, filters, rates)."""
    h = c["hidden"]
    flops = 2.0 * 256 * h  # the codebook sum's 256 -> 512 output projection
    flops += 2.0 * h * 4 * 2  # the depthwise upsample (kernel 4), 2 positions
    flops += 2 * c["layers"] * 2.0 * (4 * h * h + 2 * h * c["mlp"] + c["window"] * h * 2)  # 2 positions
    ch, positions = c["filters"] * 2 ** len(c["rates"]), 2
    flops += 2.0 * h * ch * 7 * positions
    act = 0.0
    for r in c["rates"]:
        out = ch // 2
        flops += 2.0 * ch * out * 2 * r * positions
        positions *= r
        flops += 2.0 * (out * (out // 2) * 3 + (out // 2) * out) * positions
        act += 4 * out * positions * BYTES_BF16
        ch = out
    flops += 2.0 * ch * 3 * positions
    return flops, act
