"""The priors every family's GPU cost profile is derived from: the simulated GPUs' datasheets, the
achievable fractions of their bandwidth and FLOP/s, the per-kernel overhead, and the paper's SM-scaling and
codec facts (Qwen3-TTS on H100, §2.3). Nothing here is fitted; each family's `sim.py` does the arithmetic on
its own sizes with these and states what it fits, if anything. Pure arithmetic: no torch, no engine.

On `s` of the device's `S` SMs: decode_ms * (1 + p(b) * (S/s - 1)) (Amdahl), with p chosen so that on
108 of 132 SMs the step keeps 99% of its speed at batch 1 and 93% at batch 256 (paper §2.3, O1:
"93-99%"); p is interpolated in log2(batch).

Codec (chunks of 10 frames), from the paper's four latencies (§2.3, O3): whole H100 1.9 ms for one chunk
and 10 ms for 16; on 24 SMs beside the backbone 5.0 and 49 ms. Split as serial + per-chunk work:

    codec_ms(b, s) = c0 * (132/s)^m + c1 * b * (132/s)^k

whole device: c1 = (10-1.9)/15, c0 = 1.9 - c1; 24 SMs: the same two equations give k (~0.99: the work
scales with SMs) and m (~0.25: the serial part barely does). Tables at every multiple of 8 SMs go in
the profile's `sm_ms` so the simulator sees the batch-dependent scaling.

Interference (two lanes sharing the device without a partition, each slowed by the factor while they
overlap): 2 / (lm speed on 100 SMs + codec speed on 32 SMs), i.e. colocation does no better than the
paper's 100/32 partition and its loss is shared evenly.


Other GPUs: H200 is an H100 with 4.8 TB/s; B200 has 148 SMs, 8 TB/s and 2.25 PFLOP/s. The codec's per-SM
speed is taken equal to H100's (no codec micro facts exist for them): a stated assumption, checked against
the paper's B200 result where possible (b200-pessimistic: models/qwen3_tts/sim.py's docstring).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

BYTES_BF16 = 2


@dataclass(frozen=True)
class GpuSpec:
    name: str
    sms: int
    bandwidth: float  # bytes/s (datasheet)
    flops: float  # dense bf16 FLOP/s (datasheet)
    paper_split: tuple[int, int]  # (lm, codec) SMs the paper uses (or the analogous one)
    codec_per_sm: float = 1.0  # the codec's speed per SM relative to H100's (see the module docstring)


# B200 codec per-SM speed implied by the paper's 84/64 choice at 52 req/s (module docstring)
B200_PESSIMISTIC_CODEC = 0.565

GPUS: dict[str, GpuSpec] = {
    "h100": GpuSpec("h100", 132, 3.35e12, 989e12, (100, 32)),
    "h200": GpuSpec("h200", 132, 4.8e12, 989e12, (100, 32)),
    "b200": GpuSpec("b200", 148, 8.0e12, 2250e12, (84, 64)),
    "b200-pessimistic": GpuSpec("b200-pessimistic", 148, 8.0e12, 2250e12, (84, 64), B200_PESSIMISTIC_CODEC),
}

# Priors (not fitted): achievable fraction of datasheet bandwidth for streaming weight reads, and of
# peak FLOP/s for skinny (batch <= 256 rows) GEMMs.
BW_EFF = 0.80
FLOP_EFF = 0.50

# Paper §2.3 micro facts (H100, 132 SMs).
REF_SMS = 132
CODEC_WHOLE = {1: 1.9, 16: 10.0}
CODEC_24_BESIDE = {1: 5.0, 16: 49.0}
SPEED_108_OF_132 = {1: 0.99, 256: 0.93}

# v2 priors (not fitted): kernels of one fused transformer layer and per model/pass extras, and the
# overhead of one small kernel replayed from a CUDA graph (launch gap + ramp/drain), on every GPU.
KERNELS_PER_LAYER = 7
KERNELS_PER_MODEL = 3
LAUNCH_US = 2.5
# How far Qwen3-TTS's fitted per-row decode cost on H100 exceeds its own arithmetic (models/qwen3_tts/sim.py,
# v2: 0.0835 vs 0.0135 ms): the other families' "pessimistic" settings carry it over, not refitted.
ROW_INEFFICIENCY = 0.0835 / 0.0135

DECODE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
CODEC_BATCHES = (1, 2, 4, 8, 16, 32)


def codec_coefficients() -> dict[str, float]:
    c1 = (CODEC_WHOLE[16] - CODEC_WHOLE[1]) / 15
    c0 = CODEC_WHOLE[1] - c1
    c1_24 = (CODEC_24_BESIDE[16] - CODEC_24_BESIDE[1]) / 15
    c0_24 = CODEC_24_BESIDE[1] - c1_24
    ratio = math.log(REF_SMS / 24)
    return {"c0": c0, "c1": c1, "k": math.log(c1_24 / c1) / ratio, "m": math.log(c0_24 / c0) / ratio}


def codec_ms(batch: float, sms: float, per_sm: float = 1.0) -> float:
    """One codec call of `batch` chunks on `sms` SMs; `per_sm` < 1 is a codec slower per SM than H100's."""
    c = codec_coefficients()
    x = REF_SMS / sms
    return (c["c0"] * x ** c["m"] + c["c1"] * batch * x ** c["k"]) / per_sm


def amdahl_p(batch: float) -> float:
    """Fraction of the step that scales with SMs, from the 93-99% on 108/132 fact."""
    x = REF_SMS / 108 - 1
    p1 = (1 / SPEED_108_OF_132[1] - 1) / x
    p256 = (1 / SPEED_108_OF_132[256] - 1) / x
    f = min(1.0, max(0.0, math.log2(max(1.0, batch)) / 8))
    return p1 + (p256 - p1) * f


def decode_speed(batch: float, sms: float, total_sms: int) -> float:
    return 1 / (1 + amdahl_p(batch) * (total_sms / sms - 1))
