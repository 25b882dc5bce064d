"""Cost profiles for Kyutai TTS 1.6B (kyutai/tts-1.6b-en_fr) on the simulated GPUs, from arithmetic on its
published sizes (models/kyutai_tts/family.py KYUTAI_TTS_1_6B: its config.json) with the priors of
models/sim_priors.py (BW_EFF 0.8, FLOP_EFF 0.5, 2.5 us per kernel, the paper's SM-scaling and codec-SM
facts). Nothing is fitted: no published serving capacity exists for it. Two settings ship side by side:
  * "pessimistic" (`--gpu h100`, the default): the per-row cost x ROW_INEFFICIENCY (6.2, the factor
    Qwen3-TTS's fitted per-row cost on H100 exceeds its own arithmetic, as CSM's and Dia's profiles carry
    over) and the codec's convolutions at half the FLOP prior;
  * "optimistic" (`--gpu h100-optimistic`): the arithmetic at the priors as is.

A decode step is one position per row and emits one frame (after the 18-step lead: the 16-step audio delay
and the acoustic codebooks' 2): the main transformer (16 layers, 2048 wide, 16 heads of 128, SiLU-gated MLP
of 5632, a cross-attention per layer over the voice's 625 conditioning positions, the text head over 8000),
then the depformer's 32 passes (4 layers, 1024 wide, a weight set per pass from the 11 of the schedule, its
input projection and one codebook head each), each over its own <= 32-position cache:
    decode_ms(b) = (main weights + 32 x depformer pass weights) bf16 / (BW * BW_EFF)
                 + kernels x LAUNCH_US   all in one graph
                 + b x row_ms          self-attention KV of CTX positions (window 500) + the cross-attention
                                       K/V of the row's voice (625 x 16 layers x 2 x 2048, read per row: a
                                       voice shared by rows is not deduplicated) + 2 FLOP per parameter read
    prefill_ms   = one step (a request's prompt is one position: its text arrives as it is consumed)
Assumptions: each depformer weight set (42 M parameters, 84 MB in bf16) is read from memory once per pass
(it does not stay in the 50 MB L2), so the depformer is ~60% of a step's weight traffic; CFG is distilled
(one pass per row, no doubled batch); a request's average context is half its frames plus the lead (an
~6.5 s utterance: 81 frames + 18 lead -> CTX 60 positions).

Codec per 1920-sample frame: Mimi's decoder, as CSM's (the same released Mimi; moshi's weight names).

Write both profiles of a GPU (no fit to run):

    .venv/bin/python -m voxcli.bench.calibration --family kyutai_tts  # recipes/gpus/h100-*kyutai-tts-*
"""

from __future__ import annotations

from typing import Any

from .. import sim_unfitted
from ..codecs.mimi.sim import CODEC_KERNELS, codec_frame_cost  # the same released Mimi decoder as CSM's
from ..registry import sim_sizes
from ..sim_priors import BYTES_BF16, GPUS, KERNELS_PER_LAYER, KERNELS_PER_MODEL, LAUNCH_US, ROW_INEFFICIENCY
from ..sim_profile import render_profile, stage_profile
from ..sim_unfitted import datasheet_line

MODEL = "kyutai-tts-1.6b"
PROMPT_TOKENS = 1
CTX_POSITIONS = 60
CROSS_POSITIONS = 625  # 5 voice slots x 125 (moshi TTSModel.max_speakers)
SAMPLING_KERNELS = 2
FRAMES_REF = 10


def sizes() -> dict[str, Any]:
    return sim_sizes(MODEL)


def main_params() -> int:
    m = sizes()["main"]
    h = m["hidden"]
    layer = 4 * h * h + 2 * h * h + 3 * h * m["mlp"]  # fused qkv + out, cross q + out, gated MLP
    return m["layers"] * layer + h * m["text_vocab"]


def depth_params() -> int:
    """One depformer pass: its weight set's layers, its input projection and its codebook head."""
    d = sizes()["depth"]
    h = d["hidden"]
    return d["layers"] * (4 * h * h + 3 * h * d["mlp"]) + d["main_hidden"] * h + h * d["vocab"]


def backbone_params() -> int:
    return main_params()


def step_params() -> int:
    return main_params() + sizes()["depth"]["passes"] * depth_params()


def row_bytes() -> float:
    m, d = sizes()["main"], sizes()["depth"]
    kv = m["layers"] * 2 * m["hidden"] * BYTES_BF16 * CTX_POSITIONS
    cross = m["layers"] * 2 * m["hidden"] * BYTES_BF16 * CROSS_POSITIONS
    depth_kv = d["passes"] * d["layers"] * 2 * d["hidden"] * BYTES_BF16 * (d["passes"] + 1) / 2
    return kv + cross + depth_kv


def kernels_per_step() -> int:
    m, d = sizes()["main"], sizes()["depth"]
    depth = d["passes"] * (d["layers"] * KERNELS_PER_LAYER + KERNELS_PER_MODEL + SAMPLING_KERNELS)
    return m["layers"] * (KERNELS_PER_LAYER + 4) + KERNELS_PER_MODEL + SAMPLING_KERNELS + depth


def terms(gpu_name: str, setting: str) -> dict[str, float]:
    flops, act = codec_frame_cost(sizes()["codec"])
    return sim_unfitted.stage_terms(
        gpu_name, setting, step_params=step_params(), backbone_params=backbone_params(),
        row_bytes=row_bytes(), kernels=kernels_per_step(), prompt_tokens=PROMPT_TOKENS,
        codec_kernels=CODEC_KERNELS, codec_flops=flops, codec_act=act,
    )


def profile_name(gpu_name: str, setting: str) -> str:
    return sim_unfitted.profile_name(gpu_name, setting, MODEL)


def build_profile(gpu_name: str, setting: str) -> dict:
    g = GPUS[gpu_name]
    t = terms(gpu_name, setting)
    return stage_profile(
        profile_name(gpu_name, setting), g, g.paper_split, t, t["codec_frame_ms"], FRAMES_REF
    )


def profile_toml(gpu_name: str, setting: str) -> str:
    t = terms(gpu_name, setting)
    g = GPUS[gpu_name]
    flops, act = codec_frame_cost(sizes()["codec"])
    how = {
        "pessimistic": f"arithmetic row x {ROW_INEFFICIENCY:.1f} (Qwen's H100 fit), codec at half conv "
        "efficiency; nothing fitted",
        "optimistic": "the arithmetic per-row cost, nothing fitted",
    }[setting]
    head = [
        "Written by `python -m voxcli.bench.calibration --family kyutai_tts`: Kyutai TTS 1.6B on "
        f"{gpu_name}, "
        f"setting {setting!r}",
        f"row_ms {how}. Derivation and assumptions in models/kyutai_tts/sim.py's docstring.",
        datasheet_line(g),
        f"a step reads {step_params() / 1e9:.3f} G params (main {main_params() / 1e9:.3f} G + 32 "
        "depformer "
        f"passes of {depth_params() / 1e9:.3f} G); {kernels_per_step()} kernels x {LAUNCH_US} us",
        f"decode(b) = floor {t['floor_ms']:.3f} ms + b x row {t['row_ms']:.4f} ms (arithmetic row "
        f"{t['arith_row_ms']:.4f} ms at ctx {CTX_POSITIONS})",
        f"codec: {t['codec_c0_ms']:.3f} ms/call + {t['codec_frame_ms'] * 1e3:.2f} us/frame "
        f"({flops / 1e9:.2f} GFLOP + {act / 1e6:.2f} MB per frame)",
    ]
    return render_profile(head, build_profile(gpu_name, setting), f"kyutai-tts-{setting}")


CALIBRATION = sim_unfitted.calibration(__doc__ or "", MODEL, profile_toml)
