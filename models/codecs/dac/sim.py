"""The DAC 44.1 kHz decoder's cost on a simulated GPU, from arithmetic on its sizes: Dia and Zonos decode
with the same released codec, so their profiles compute its cost here (models/dia/sim.py's docstring
states the assumptions): per frame, the input conv, each block's transposed conv and three residual
units, and the output conv; activations counted at bf16.
"""

from __future__ import annotations

from typing import Any

from ...sim_priors import BYTES_BF16


def dac_frame_flops(c: dict[str, Any]) -> tuple[float, float]:
    """(conv FLOPs, activation bytes) per 512-sample frame of the DAC decoder of sizes `c` (a family's
    declared `dac` sizes: hidden, latent, rates)."""
    ch, flops, act = c["hidden"], 2.0 * c["latent"] * c["hidden"] * 7, 0.0
    positions = 1
    for stride in c["rates"]:
        out = ch // 2
        flops += 2.0 * ch * out * 2 * stride * positions  # ConvTranspose, kernel 2 x stride, per input
        positions *= stride
        flops += 3 * 2.0 * (out * out * 7 + out * out) * positions  # 3 residual units: k7 + k1
        act += 3 * 5 * out * positions * BYTES_BF16  # snake, snake, add per unit (read + write ~5 passes)
        ch = out
    flops += 2.0 * ch * 1 * 7 * positions
    return flops, act
