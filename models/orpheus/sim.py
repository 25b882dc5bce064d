"""Cost profiles for Orpheus 3B on the simulated GPUs, from arithmetic on published sizes: NOTHING is fitted.

No serving capacity of Orpheus has been published in a form to fit to, so two settings ship side by side:
  * "pessimistic" (`--gpu h100`): the per-row decode cost is the arithmetic one times 6.2, the factor by which
    Qwen3-TTS's fitted per-row cost on H100 exceeded its own arithmetic (models/sim_priors.ROW_INEFFICIENCY,
    carried over as Dia's and Higgs' profiles carry it: the same serving stack, the same small GEMMs, paged-KV
    gathers and sampling over a 156,940-token vocabulary); SNAC runs at half the conv efficiency.
  * "optimistic" (`--gpu h100-optimistic`): the arithmetic as is.

THE SIM'S STEP IS A FRAME. Orpheus emits one token per LM step and a frame every seven (program.py); the sim
engine emits a frame per step, so a simulated decode step stands for the seven token steps of one frame
and costs 7 x a token step (floor and rows alike; `SimSpec.codebooks` = 7 codes a frame). Capacity, TTFA
(a 4-frame first chunk = 28 token steps) and the codec's load come out the same; what the sim does not show
is the finer interleaving of the real engine, which may admit or launch a codec call between the seven
steps.

Dimensions (models/orpheus/family.py): canopylabs/orpheus-3b-0.1-ft = Llama-3.2-3B (hidden 3072, 28 layers,
24 heads, 8 KV heads of 128, MLP 8192, vocab 156,940, tied embeddings) and hubertsiuzdak/snac_24khz (latent
768, decoder 1024 -> 64 channels over strides 8, 8, 4, 2, depthwise 7-tap residual convs). Per token step
(b rows):

    token_ms(b) = LM weights read once / (BW * BW_EFF)              3.21 B parameters in bf16 (the tied
                                                                    embedding read once, as the LM head)
                + kernels x LAUNCH_US                               28 x 7 + 3 + 6 (band mask, penalty,
                                                                    top-p sort/cumsum, draw, bookkeeping)
                + b x row_ms                                        KV over CTX positions / BW + 2 x params
                                                                    FLOPs + the logits row (157 k fp32)

Assumptions (stated, not fitted): a typical request is ~4 s of audio (47 frames = 329 tokens) after a
prompt of PROMPT = 30 tokens, so its average context is CTX = 30 + 165 positions; BW_EFF, FLOP_EFF,
LAUNCH_US and the SM scaling are the priors of models/sim_priors.py. The codec cost per frame is the
"whole" mode's (codec.py): a chunk of n frames decodes n + 6 frames (3 of left context, 3 held back),
charged here as (n + 6) / n per frame at the reference chunk of 16 frames (1.375 x); the "canopy" mode
decodes 4 frames per frame (4 x).

Prefill: the LM over PROMPT tokens (weights read once + 2 x params FLOPs per token).

    .venv/bin/python -m voxcli.bench.calibration --family orpheus [--gpu h100]
"""

from __future__ import annotations

from typing import Any

from .. import sim_stages, sim_unfitted
from ..registry import sim_sizes
from ..sim_priors import (
    BW_EFF,
    BYTES_BF16,
    FLOP_EFF,
    GPUS,
    KERNELS_PER_LAYER,
    KERNELS_PER_MODEL,
    LAUNCH_US,
    ROW_INEFFICIENCY,
)
from ..sim_profile import render_profile

MODEL = "orpheus-3b"
STEPS_PER_FRAME = 7
PROMPT_TOKENS = 30
CTX_POSITIONS = 30 + 165
SAMPLING_KERNELS = 6
CODEC_KERNELS = 120  # SNAC's convolutions, snakes and adds (~90) + the window gather and noise draws
CHUNK_REF = 16
WHOLE_MODE_OVERHEAD = (CHUNK_REF + 6) / CHUNK_REF


def sizes() -> dict[str, Any]:
    return sim_sizes(MODEL)


def lm_params() -> int:
    s = sizes()["lm"]
    return sim_stages.stack_params(s, s["vocab"])  # the tied embedding, read as the head


def row_bytes() -> float:
    s = sizes()["lm"]
    return sim_stages.kv_bytes(s, CTX_POSITIONS) + s["vocab"] * 4


def kernels_per_step() -> int:
    return sizes()["lm"]["layers"] * KERNELS_PER_LAYER + KERNELS_PER_MODEL + SAMPLING_KERNELS


def snac_frame_flops() -> tuple[float, float]:
    """(conv FLOPs, activation bytes) of SNAC's decoder for one frame (4 latent steps, 2048 samples)."""
    c = sizes()["snac"]
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


def terms(gpu_name: str, setting: str) -> dict[str, float]:
    sim_unfitted.check_setting(setting)
    gpu = GPUS[gpu_name]
    bw, fl = gpu.bandwidth * BW_EFF, gpu.flops * FLOP_EFF
    p = lm_params()
    arith_row = (row_bytes() / bw + 2 * p / fl) * 1e3
    token_floor = p * BYTES_BF16 / bw * 1e3 + kernels_per_step() * LAUNCH_US / 1e3
    row = arith_row * (ROW_INEFFICIENCY if setting == "pessimistic" else 1.0)
    conv, act = snac_frame_flops()
    conv_eff = 0.5 if setting == "pessimistic" else 1.0
    return {
        "token_floor_ms": token_floor,
        "token_row_ms": row,
        "arith_row_ms": arith_row,
        "floor_ms": STEPS_PER_FRAME * token_floor,  # the sim's step is a frame (module doc)
        "row_ms": STEPS_PER_FRAME * row,
        "prefill_ms": token_floor + 2 * p * PROMPT_TOKENS / fl * 1e3,
        "prefill_token_ms": 2 * p / fl * 1e3,
        "codec_c0_ms": CODEC_KERNELS * LAUNCH_US / 1e3,
        "codec_frame_ms": WHOLE_MODE_OVERHEAD * (conv / (fl * conv_eff) + act / bw) * 1e3,
    }


def build_profile(gpu_name: str, setting: str = "pessimistic") -> dict:
    return sim_unfitted.build_profile(MODEL, gpu_name, setting, terms(gpu_name, setting), CHUNK_REF)


def profile_toml(gpu_name: str, setting: str) -> str:
    t = terms(gpu_name, setting)
    conv, act = snac_frame_flops()
    g = GPUS[gpu_name]
    head = [
        f"Written by `python -m voxcli.bench.calibration --family orpheus`: Orpheus 3B on {gpu_name}, "
        f"setting "
        f"{setting!r}; NO fitted",
        "parameter (nothing published to fit to); derivation in models/orpheus/sim.py.",
        f"{g.name}: {g.sms} SMs, {g.bandwidth / 1e12:.2f} TB/s, {g.flops / 1e12:.0f} TFLOP/s bf16 "
        "(datasheet)",
        f"a token step reads {lm_params() / 1e9:.2f} B params; {kernels_per_step()} kernels x "
        f"{LAUNCH_US} us; "
        f"token(b) = {t['token_floor_ms']:.3f} ms + b x {t['token_row_ms']:.4f} ms",
        f"the sim's step is a frame = {STEPS_PER_FRAME} token steps: decode(b) = floor "
        f"{t['floor_ms']:.3f} ms + b x row {t['row_ms']:.4f} ms (arithmetic token row "
        f"{t['arith_row_ms']:.4f} ms at ctx {CTX_POSITIONS}"
        + (f"; x {ROW_INEFFICIENCY:.1f} carried from Qwen's H100 fit)" if setting == "pessimistic" else ")"),
        f"codec (SNAC, whole mode x {WHOLE_MODE_OVERHEAD:.3f} re-decoded context): "
        f"{t['codec_c0_ms']:.3f} ms/call + "
        f"{t['codec_frame_ms'] * 1e3:.2f} us/frame ({conv / 1e9:.3f} GFLOP + {act / 1e6:.2f} MB per frame)",
    ]
    return render_profile(head, build_profile(gpu_name, setting), f"orpheus-{setting}")


CALIBRATION = sim_unfitted.calibration(__doc__ or "", MODEL, profile_toml)
