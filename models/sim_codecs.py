"""Codec and in-loop stage shapes one family runs today but which are library shapes, not family code:
SNAC's decoder (Orpheus), the sigma-VAE conv stacks (VibeVoice's acoustic decoder and semantic encoder)
and an adaLN diffusion head (VibeVoice). Each is keyed by a sizes table a family declares
(models/<family>/family.py `SimModel.sizes`); the shapes shared by several families are in
models/sim_stages.py. Pure arithmetic over models/sim_priors.py; integer counts stay integers, so a
profile computed from them is bit-identical to the per-family copies they replace.
"""

from __future__ import annotations

from .sim_priors import BYTES_BF16
from .sim_stages import Sizes, dac_decoder_frame


def snac_frame_cost(c: Sizes) -> tuple[float, float]:
    """(conv FLOPs, activation bytes) of SNAC's decoder for one frame (`c`: latent, hidden, rates,
    codebook_dim, latent_steps): depthwise + pointwise input, the levels' output projections, then per
    stride a transposed conv halving the channels, a noise block's 1x1 and 3 depthwise residual units."""
    lat, ch, steps = c["latent"], c["hidden"], c["latent_steps"]
    flops = 2.0 * steps * (lat * 7 + lat * ch)  # depthwise 7-tap + pointwise in
    flops += 2.0 * steps * 3 * c["codebook_dim"] * lat  # the three levels' output projections
    act, positions = 0.0, steps
    for stride in c["rates"]:
        out = ch // 2
        flops += 2.0 * ch * out * 2 * stride * positions  # transposed conv, 2 x stride taps per input
        positions *= stride
        flops += 2.0 * out * out * positions  # noise block's 1x1
        flops += 3 * 2.0 * (out * 7 + out * out) * positions  # 3 residual units: depthwise 7-tap + 1x1
        act += (3 * 5 + 2) * out * positions * BYTES_BF16
        ch = out
    return flops + 2.0 * ch * 7 * positions, act


def vae_stack(c: Sizes, encoder: bool) -> tuple[float, int]:
    """(FLOPs per frame, params) of a sigma-VAE conv stack (`c`: filters, ratios, depths, ffn, kernel,
    hop, latent, semantic): the decoder from the latent up to `hop` samples, or the encoder down from them
    to the `semantic` channels. Each stage: a strided conv, then `depth` blocks of a depthwise conv and a
    2 x `ffn` pointwise MLP."""
    f, ratios, depths, exp, k = c["filters"], c["ratios"], c["depths"], c["ffn"], c["kernel"]
    n = len(depths)
    flops, params = 0.0, 0
    if encoder:
        positions, ch = float(c["hop"]), f
        stages = [(f * 2 ** (i + 1), r, depths[i + 1]) for i, r in enumerate(ratios)]
        flops += 2.0 * 1 * f * k * positions
        flops += depths[0] * 2.0 * (k * f + 2 * exp * f * f) * positions
        params += depths[0] * (k * f + 2 * exp * f * f)
        for cout, r, d in stages:
            positions /= r
            flops += 2.0 * ch * cout * 2 * r * positions
            flops += d * 2.0 * (k * cout + 2 * exp * cout * cout) * positions
            params += ch * cout * 2 * r + d * (k * cout + 2 * exp * cout * cout)
            ch = cout
        flops += 2.0 * ch * c["semantic"] * k * positions
    else:
        rdepths = list(reversed(depths))
        positions, ch = 1.0, f * 2 ** (n - 1)
        flops += 2.0 * c["latent"] * ch * k + rdepths[0] * 2.0 * (k * ch + 2 * exp * ch * ch)
        params += c["latent"] * ch * k + rdepths[0] * (k * ch + 2 * exp * ch * ch)
        for i, r in enumerate(reversed(ratios)):
            cout = ch // 2
            positions *= r
            flops += 2.0 * ch * cout * 2 * r * positions / r + rdepths[i + 1] * 2.0 * (
                k * cout + 2 * exp * cout * cout) * positions
            params += ch * cout * 2 * r + rdepths[i + 1] * (k * cout + 2 * exp * cout * cout)
            ch = cout
        flops += 2.0 * ch * k * positions
    return flops, params


def vae_codec_frame(c: Sizes) -> tuple[float, int]:
    """(FLOPs per frame, params) of the acoustic decoder plus the semantic encoder run on its output."""
    dec, enc = vae_stack(c, False), vae_stack(c, True)
    return dec[0] + enc[0], dec[1] + enc[1]


def vae_codec_kernels(c: Sizes) -> int:
    """Kernels of the decoder and the encoder: ~6 per block, one per stride, in and out convs."""
    return 2 * (sum(c["depths"]) * 6 + len(c["ratios"]) + 2)


def diffusion_head_params(s: Sizes) -> int:
    """An adaLN diffusion head (`s`: hidden, layers, mlp, latent, freq): per layer a SwiGLU MLP and its
    3-way modulation, then the final layer's modulation and projection, the latent in/out and the
    timestep embedding."""
    h, m = s["hidden"], s["mlp"]
    return s["layers"] * (3 * h * m + 3 * h * h) + 2 * h * h + h * s["latent"] * 2 + s["freq"] * h + h * h


# --- the X-Codec / DAC-shaped tokenizers' decoders (models/sim_stages.py dac_decoder_frame) ----------------
def xcodec_frame_cost(c: Sizes) -> tuple[float, float]:
    """(conv FLOPs, activation bytes) per frame of X-Codec's acoustic decoder (`c`: fc2_in, latent,
    hidden, rates): fc2 and the input conv, then the shared DAC shape (the unified speech LMs' codec)."""
    head = 2.0 * c["fc2_in"] * c["latent"] + 2.0 * c["latent"] * c["hidden"] * 7  # fc2 + conv1
    return dac_decoder_frame(c["hidden"], c["rates"], head)


def rvq_dac_frame_cost(c: Sizes) -> tuple[float, float]:
    """(conv FLOPs, activation bytes) per frame of an RVQ tokenizer's DAC-shaped decoder (`c`: latent,
    hidden, rvq_hidden, codebooks, codebook_dim, rates): conv1, fc2 and each codebook's project_out, then
    the shared DAC shape (Higgs Audio's tokenizer)."""
    head = 2.0 * c["latent"] * c["hidden"] * 7 + 2.0 * c["rvq_hidden"] * c["latent"]  # conv1 + fc2
    head += c["codebooks"] * 2.0 * c["codebook_dim"] * c["rvq_hidden"]  # project_out per codebook
    return dac_decoder_frame(c["hidden"], c["rates"], head)


# --- the flow-matching token-to-mel stages (CosyVoice 2's conformer + UNet, CosyVoice 3's DiT) ------------
def dit_token_flops(sizes: Sizes, history: int) -> int:
    """FLOPs per speech token of a DiT flow (`sizes`: dit (dim, depth, heads, dim_head, ff_mult, steps,
    cfg_rows), token_mel_ratio): per layer q, k, v, o and the FFN, x 2 FLOPs x mel frames x Euler steps x
    CFG rows, plus attention over `history` cached frames."""
    d = sizes["dit"]
    w = d["dim"]
    per_layer = 4 * w * w + 2 * w * (w * d["ff_mult"])
    frames = sizes["token_mel_ratio"]
    gemm = 2 * per_layer * d["depth"] * frames * d["steps"] * d["cfg_rows"]
    attn = 2 * 2 * history * d["heads"] * d["dim_head"] * d["depth"] * frames * d["steps"] * d["cfg_rows"]
    return gemm + attn


def dit_kernels(sizes: Sizes) -> int:
    """Kernels of one DiT flow call: ~8 per layer per Euler step, + 200 (encoder, vocoder, gathers)."""
    d = sizes["dit"]
    return d["depth"] * d["steps"] * 8 + 200


def conformer_token_flops(sizes: Sizes, history: int) -> float:
    """FLOPs per speech token of a conformer encoder (`sizes`: encoder (dim, layers, up_layers, ffn),
    token_mel_ratio): q, k, v, o, pos and the FFN per layer, the upsampled layers per mel frame, the
    upsample conv (kernel 5), attention over `history` cached frames."""
    e, r = sizes["encoder"], sizes["token_mel_ratio"]
    d = e["dim"]
    layer = 5 * d * d + 2 * d * e["ffn"]
    first = e["layers"] - e["up_layers"]
    gemm = 2 * layer * (first + r * e["up_layers"]) + 2 * d * d * 5 * r  # + upsample conv (kernel 5)
    attn = 2 * 2 * history * d * (first + r * e["up_layers"])
    return float(gemm + attn)


def unet_token_flops(sizes: Sizes, history: int) -> float:
    """FLOPs per speech token of a 1-D UNet flow (`sizes`: unet (channels, levels, blocks, heads, head_dim,
    steps, cfg_rows), token_mel_ratio): per level its transformer blocks and 2 causal convs, x 2 FLOPs per
    mel frame x Euler steps x CFG rows, plus attention over `history` cached frames."""
    u, r = sizes["unet"], sizes["token_mel_ratio"]
    c, inner = u["channels"], u["heads"] * u["head_dim"]
    block = 3 * c * inner + inner * c + 2 * c * 4 * c
    convs = 2 * 3 * c * c
    per_frame = 2 * (u["levels"] * (u["blocks"] * block + convs))
    attn = 2 * 2 * history * inner * u["blocks"] * u["levels"]
    return float((per_frame + attn) * r * u["steps"] * u["cfg_rows"])


def unet_kernels(sizes: Sizes) -> int:
    """Kernels of one UNet flow call: ~8 per block per Euler step, + 200."""
    u = sizes["unet"]
    return u["levels"] * u["blocks"] * u["steps"] * 8 + 200
