"""The stage shapes several families' cost declarations share, and the arithmetic on them, written once.

A family's `sim.py` declares its cost (models/sim_cost.py CostShape) over its sizes
(models/<family>/family.py `SimModel.sizes`); the cost of a stage that several families share is
computed here from the sizes alone: a grouped-query decoder stack (weights, KV bytes), an encoder-decoder's
text prefill, and the three released codec decoders more than one family runs (DAC 44.1 kHz: Dia, Zonos;
Mimi: CSM, Kyutai TTS; HiFT: CosyVoice 2 and 3); the shapes one family runs today are in
models/sim_codecs.py. So no family's cost reads another family's module. Pure arithmetic over
models/sim_priors.py; integer counts stay integers, so a profile computed here is bit-identical to the
per-family copies it replaces (benchmarks/profile_hashes.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .sim_priors import BYTES_BF16, KERNELS_PER_LAYER

Sizes = Mapping[str, Any]


def gqa_layer_params(s: Sizes) -> int:
    """One decoder layer of `s` (hidden, heads, kv_heads, head_dim, mlp): q and o, k and v, a gated MLP."""
    h, hd = s["hidden"], s["head_dim"]
    return 2 * h * s["heads"] * hd + 2 * h * s["kv_heads"] * hd + 3 * h * s["mlp"]


def stack_params(s: Sizes, head_rows: int) -> int:
    """The stack's layers plus a head of `head_rows` x hidden read every step."""
    return s["layers"] * gqa_layer_params(s) + s["hidden"] * head_rows


def kv_bytes(s: Sizes, positions: int) -> int:
    """Bytes of K and V (bf16) a row reads over `positions` cached positions of every layer."""
    return s["layers"] * 2 * s["kv_heads"] * s["head_dim"] * BYTES_BF16 * positions


# --- the shared codec decoders --------------------------------------------------------------------------
DAC_KERNELS = 140  # per call: the convolutions, the activations, the streaming state's gather/scatter


def dac_decoder_frame(channels: int, rates: tuple[int, ...] | list[int],
                      head_flops: float) -> tuple[float, float]:
    """(conv FLOPs, activation bytes) to decode one frame with a DAC-style decoder: `head_flops` for what
    runs before the upsampling blocks (input conv, quantizer projections: each codec's own), then per
    stride a transposed conv halving the channels and three residual units (7-tap dilated conv + 1x1),
    then the 7-tap output conv. Higgs' tokenizer and ESPnet's X-Codec / DAC share this shape."""
    ch, positions = channels, 1
    flops, act = head_flops, 0.0
    for stride in rates:
        out = ch // 2
        flops += 2.0 * ch * out * 2 * stride * positions
        positions *= stride
        flops += 3 * 2.0 * (out * out * 7 + out * out) * positions
        act += 3 * 5 * out * positions * BYTES_BF16
        ch = out
    return flops + 2.0 * ch * 7 * positions, act


def dac_frame_cost(c: Sizes) -> tuple[float, float]:
    """(conv FLOPs, activation bytes) per frame of DAC 44.1 kHz's decoder (`c`: hidden, latent, rates):
    its input conv (latent -> hidden, kernel 7), then the shared DAC shape."""
    return dac_decoder_frame(c["hidden"], c["rates"], 2.0 * c["latent"] * c["hidden"] * 7)


def mimi_kernels(c: Sizes) -> int:
    """Kernels of one Mimi decode call: its transformer, then RVQ, upsample, SEANet convs, gather/scatter."""
    return c["layers"] * KERNELS_PER_LAYER + 40


def mimi_frame_cost(c: Sizes) -> tuple[float, float]:
    """(FLOPs, activation bytes) to decode one 12.5 Hz frame with Mimi's decoder (`c`: hidden, layers,
    mlp, window, filters, rates): the codebook sum's projection, the depthwise upsample to 25 Hz, the
    windowed transformer at 25 Hz, the SEANet decoder."""
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


HIFT_UPSAMPLE_KERNELS = (16, 11, 7)
HIFT_SOURCE_KERNELS = (7, 7, 11)
HIFT_MELS = 80


def hift_frame_flops(c: Sizes) -> float:
    """Convolution FLOPs per mel frame of HiFT (`c`: base channels, upsample rates): conv_pre, the
    upsampling convs, 3 x 3 x 2 residual convs per stage (kernels 3, 7, 11), the source branch's residual
    blocks (kernels 7, 7, 11), conv_post."""
    f = 2 * HIFT_MELS * c["base"] * 5
    rate = 1
    ch = c["base"]
    for i, (u, k) in enumerate(zip(c["upsample"], HIFT_UPSAMPLE_KERNELS, strict=True)):
        rate *= u
        out = ch // 2
        f += 2 * ch * out * k * rate
        f += 2 * out * out * (3 + 7 + 11) * 2 * 3 * rate  # resblocks
        f += 2 * out * out * HIFT_SOURCE_KERNELS[i] * 2 * 3 * rate  # source resblocks
        ch = out
    f += 2 * ch * 18 * 7 * rate
    return float(f)


def text_encoder_prefill_params(sizes: Sizes) -> int:
    """Params an encoder-decoder's prefill runs over its text (`sizes`: encoder, decoder): the encoder
    stack with its embedding, and the decoder's cross K/V projections of every layer."""
    e, d = sizes["encoder"], sizes["decoder"]
    enc = stack_params(e, e["vocab"])
    return enc + d["layers"] * 2 * e["hidden"] * d["cross_kv_heads"] * d["cross_head_dim"]
