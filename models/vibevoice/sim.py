"""Cost profiles for VibeVoice-1.5B on the simulated GPUs, from arithmetic on its published sizes
(family.py VIBEVOICE_15B) with the priors of models/sim_priors.py (BW_EFF 0.8, FLOP_EFF 0.5, 2.5 us per
kernel). Nothing is fitted: no published serving capacity exists for VibeVoice. Two settings:
  * "pessimistic" (`--gpu h100`, the default): the per-row cost x ROW_INEFFICIENCY (6.2, Qwen3-TTS's fitted
    per-row cost on H100 over its own arithmetic, carried over as the other families' profiles do) and the
    codec convolutions at half the FLOP prior;
  * "optimistic" (`--gpu h100-optimistic`): the arithmetic at the priors as is.

The design being priced (models/vibevoice/program.py): the codec is inside the LM loop, so one decode step
of a row is a whole generate iteration and the codec lane only unpacks PCM (~0 cost). A step of b rows:
  * the LM (Qwen2.5-1.5B: 28 layers, 1536 wide, 12/2 heads of 128, MLP 8960) over 3 sequences per row:
    the conditional one, the token guidance's and the diffusion negative (CFG 1.3: both guidance passes
    every frame), its weights read once per step; the LM head only for the 4 tokens that can be picked;
  * the diffusion head (4 adaLN SwiGLU layers, 1536 wide, MLP 4608, ~123 M params) x SOLVER_STEPS (10)
    solver steps, each over 2 rows per request (the CFG pair): its weights read 10 times per step (they
    stay out of L2 at 246 MB bf16), its FLOPs 2 x 10 x 2 x params per row;
  * the acoustic decoder (sigma-VAE, 32 filters, ratios 8,5,5,4,2,2 up to 3200 samples, depths 8,3,3,3,3,3,3
    from the top) and the semantic encoder (the same stack downward, 128-d out) on one frame per row:
    their weights read once per step, their conv FLOPs per row (`codec_frame_flops`).
    decode_ms(b) = (LM + 10 x head + decoder + encoder weights) bf16 / (BW x BW_EFF) + kernels x LAUNCH_US
                 + b x row_ms     (3 x KV of CTX positions + FLOPs: 3 x LM + 20 x head + codec convs)
Requests are width-1 rows in the sim (SimSpec.cfg_scale None): the two guidance sequences are priced inside
row_ms instead, as they always run (guidance 1.3 is the release's default).
A request's average context: PROMPT (60 tokens: the system line and ~25 of text) + half its frames
(LibriTTS test-clean at 15 chars/s: ~6.5 s = 49 frames at 7.5 Hz): CTX = 85 positions on the conditional
sequence, 25 on each guidance sequence.

Write both profiles of a GPU (no fit to run):

    .venv/bin/python -m voxcli.bench.calibration --family vibevoice   # recipes/gpus/h100-*vibevoice-1.5b.toml
"""

from __future__ import annotations

from typing import Any

from .. import sim_unfitted
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
from ..sim_stages import kv_bytes, stack_params
from ..sim_unfitted import datasheet_line

MODEL = "vibevoice-1.5b"
PROMPT_TOKENS = 60
CTX_POSITIONS = PROMPT_TOKENS + 25
GUIDE_POSITIONS = 25
SOLVER_STEPS = 10
FRAMES_REF = 10
CODEC_LANE_MS_PER_FRAME = 0.0005  # unpacking 3200 samples: a copy
HEAD_KERNELS = 4 * 8 + 8  # per solver step: 4 adaLN layers (~8 kernels each), the final layer and the update


def sizes() -> dict[str, Any]:
    return sim_sizes(MODEL)


def lm_params() -> int:
    return stack_params(sizes()["lm"], 4)  # + the 4 LM-head rows


def head_params() -> int:
    s = sizes()["head"]
    h, m = s["hidden"], s["mlp"]
    return s["layers"] * (3 * h * m + 3 * h * h) + 2 * h * h + h * s["latent"] * 2 + s["freq"] * h + h * h


def _stack(encoder: bool) -> tuple[float, int]:
    """(FLOPs per frame, params) of one conv stack (the acoustic decoder or the semantic encoder)."""
    c = sizes()["codec"]
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


def codec_frame_flops() -> float:
    return _stack(False)[0] + _stack(True)[0]


def codec_params() -> int:
    return _stack(False)[1] + _stack(True)[1]


def step_weight_bytes() -> float:
    return (lm_params() + SOLVER_STEPS * head_params() + codec_params()) * BYTES_BF16


def row_bytes() -> float:
    return kv_bytes(sizes()["lm"], CTX_POSITIONS + 2 * GUIDE_POSITIONS)


def row_flops(conv_eff: float) -> float:
    """FLOPs of one row's step, the codec's scaled by 1 / conv_eff (its convolutions run below the prior)."""
    return 3 * 2 * lm_params() + SOLVER_STEPS * 2 * 2 * head_params() + codec_frame_flops() / conv_eff


def kernels_per_step() -> int:
    s, c = sizes()["lm"], sizes()["codec"]
    lm = 3 * (s["layers"] * KERNELS_PER_LAYER + KERNELS_PER_MODEL)  # three sequence groups
    codec = 2 * (sum(c["depths"]) * 6 + len(c["ratios"]) + 2)
    return lm + SOLVER_STEPS * HEAD_KERNELS + codec + 4


def arithmetic_row_ms(gpu_name: str, conv_eff: float = 1.0) -> float:
    g = GPUS[gpu_name]
    return (row_bytes() / (g.bandwidth * BW_EFF) + row_flops(conv_eff) / (g.flops * FLOP_EFF)) * 1e3


def terms(gpu_name: str, setting: str) -> dict[str, float]:
    sim_unfitted.check_setting(setting)
    g = GPUS[gpu_name]
    bw, fl = g.bandwidth * BW_EFF, g.flops * FLOP_EFF
    pess = setting == "pessimistic"
    arith = arithmetic_row_ms(gpu_name, 0.5 if pess else 1.0)
    return {
        "floor_ms": step_weight_bytes() / bw * 1e3 + kernels_per_step() * LAUNCH_US / 1e3,
        "row_ms": arith * ROW_INEFFICIENCY if pess else arith,
        "arith_row_ms": arith,
        "prefill_ms": lm_params() * BYTES_BF16 / bw * 1e3 + PROMPT_TOKENS * 2 * lm_params() / fl * 1e3,
        "prefill_token_ms": 2 * lm_params() / fl * 1e3,
        "codec_c0_ms": 0.005,
        "codec_frame_ms": CODEC_LANE_MS_PER_FRAME,
    }


def build_profile(gpu_name: str, setting: str) -> dict:
    return sim_unfitted.build_profile(MODEL, gpu_name, setting, terms(gpu_name, setting), FRAMES_REF)


def profile_toml(gpu_name: str, setting: str) -> str:
    t = terms(gpu_name, setting)
    g = GPUS[gpu_name]
    how = {
        "pessimistic": f"arithmetic row x {ROW_INEFFICIENCY:.1f} (Qwen's H100 fit), codec convs at half the "
        "FLOP prior; nothing fitted",
        "optimistic": "the arithmetic per-row cost, nothing fitted",
    }[setting]
    head = [
        f"Written by `python -m voxcli.bench.calibration --family vibevoice`: VibeVoice-1.5B on {gpu_name}, "
        f"setting {setting!r}",
        f"row_ms {how}. Derivation and assumptions in models/vibevoice/sim.py's docstring.",
        datasheet_line(g),
        f"a step reads {step_weight_bytes() / 1e9:.3f} GB of weights (LM {lm_params() / 1e9:.3f} G params, "
        f"{SOLVER_STEPS} head passes of {head_params() / 1e6:.1f} M, codec {codec_params() / 1e6:.1f} M); "
        f"{kernels_per_step()} kernels x {LAUNCH_US} us",
        f"decode(b) = floor {t['floor_ms']:.3f} ms + b x row {t['row_ms']:.4f} ms (arithmetic row "
        f"{t['arith_row_ms']:.4f} ms: 3 LM sequences, {2 * SOLVER_STEPS} head rows, "
        f"{codec_frame_flops() / 1e9:.2f} GFLOP of codec convs per frame)",
        "codec lane: unpacking the PCM the LM step decoded (no second decode)",
    ]
    return render_profile(head, build_profile(gpu_name, setting), f"vibevoice-{setting}")


CALIBRATION = sim_unfitted.calibration(__doc__ or "", MODEL, profile_toml)
