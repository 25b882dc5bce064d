"""Cost profiles for CSM-1B (sesame/csm-1b) on the simulated GPUs, from arithmetic on its published sizes
(models/csm/family.py CSM_1B: the sizes of its config.json) with the priors of models/sim_priors.py
(BW_EFF 0.8, FLOP_EFF 0.5, 2.5 us per kernel, the paper's SM-scaling and codec-SM facts). Nothing is fitted:
no published serving capacity exists for CSM to fit to. Two settings ship side by side:
  * "pessimistic" (`--gpu h100`, the default): the per-row cost x ROW_INEFFICIENCY (6.2, the factor
    Qwen3-TTS's fitted per-row cost on H100 exceeds its own arithmetic, carried over as Dia's and Higgs'
    profiles do) and the codec's convolutions at half the FLOP prior;
  * "optimistic" (`--gpu h100-optimistic`): the arithmetic at the priors as is.

A decode step emits one frame per row: the backbone (Llama-3.2-1B: 16 layers, 2048 wide, 32/8 heads of 64,
MLP 8192, audio head 2051) reads one position, then the depth decoder (4 layers, 1024 wide, 8/2 heads of
128, MLP 8192; its inputs projected from 2048) runs 31 passes, one per codebook 1..31, each over its own
<= 33-position cache:
    decode_ms(b) = (backbone weights + 31 x depth weights) bf16 / (BW * BW_EFF)     3.41 ms on H100
                 + kernels x LAUNCH_US   16 x 7 + 3 + 31 x (4 x 7 + 3 + 2 sampling), all in one graph
                 + b x row_ms           KV of CTX backbone positions + 2 FLOP per parameter read (the
                                        depth decoder's 31 passes included) + the depth caches
    prefill_ms   = one step + PROMPT tokens x 2 x backbone params / (FLOPS * FLOP_EFF)
Assumption: the depth decoder's weights are read from memory once per pass (its 115 M parameters, 230 MB in
bf16, do not stay in the 50 MB L2), which makes it ~79% of the step's weight traffic: the step floor is
3.6x the backbone's alone. A request's average context: PROMPT (30 text tokens: the template and ~25 of
text) + half of its frames (LibriTTS test-clean at 15 chars/s: ~6.5 s, 81 frames): CTX = 70 positions.

Codec per 1920-sample frame (Mimi's decode: the 32 codebooks summed and projected, the depthwise upsample to
25 Hz, an 8-layer 512-wide transformer at 25 Hz with a 250-position window, the SEANet decoder at ratios
8, 6, 5, 4 from 1024 channels down to 64): its conv and matmul FLOPs at FLOP_EFF (half of it pessimistic)
plus its activation traffic at BW_EFF; per call ~ 8 x 7 + 40 kernels x LAUNCH_US:
    codec_ms(b, s) = c0 x (132/s)^m + b x 10 frames x frame_ms x (132/s)^k          (Dia's structure)

Write both profiles of a GPU (no fit to run):

    .venv/bin/python -m voxcli.bench.calibration --family csm             # recipes/gpus/h100-*csm-1b.toml
"""

from __future__ import annotations

from typing import Any

from .. import sim_stages, sim_unfitted
from ..registry import sim_sizes
from ..sim_priors import BYTES_BF16, GPUS, KERNELS_PER_LAYER, KERNELS_PER_MODEL, LAUNCH_US, ROW_INEFFICIENCY
from ..sim_profile import render_profile
from ..sim_unfitted import datasheet_line

MODEL = "csm-1b"
PROMPT_TOKENS = 30
CTX_POSITIONS = PROMPT_TOKENS + 40
SAMPLING_KERNELS = 2
FRAMES_REF = 10


def sizes() -> dict[str, Any]:
    return sim_sizes(MODEL)


def backbone_params() -> int:
    b = sizes()["backbone"]
    return sim_stages.stack_params(b, b["vocab"])


def depth_params() -> int:
    """One depth pass: its layers, the input projector and one codebook head."""
    d = sizes()["depth"]
    return sim_stages.stack_params(d, d["vocab"]) + d["backbone_hidden"] * d["hidden"]


def step_params() -> int:
    return backbone_params() + sizes()["depth"]["passes"] * depth_params()


def row_bytes() -> float:
    b, d = sizes()["backbone"], sizes()["depth"]
    kv = sim_stages.kv_bytes(b, CTX_POSITIONS)
    depth_kv = (
        d["passes"] * d["layers"] * 2 * d["kv_heads"] * d["head_dim"] * BYTES_BF16 * (d["passes"] + 2) / 2
    )
    return kv + depth_kv


def kernels_per_step() -> int:
    b, d = sizes()["backbone"], sizes()["depth"]
    depth = d["passes"] * (d["layers"] * KERNELS_PER_LAYER + KERNELS_PER_MODEL + SAMPLING_KERNELS)
    return b["layers"] * KERNELS_PER_LAYER + KERNELS_PER_MODEL + SAMPLING_KERNELS + depth


def codec_frame_cost() -> tuple[float, float]:
    """(FLOPs, activation bytes) to decode one 12.5 Hz frame with Mimi's decoder (models/sim_stages.py)."""
    return sim_stages.mimi_frame_cost(sizes()["codec"])


def terms(gpu_name: str, setting: str) -> dict[str, float]:
    flops, act = codec_frame_cost()
    return sim_unfitted.stage_terms(
        gpu_name, setting, step_params=step_params(), backbone_params=backbone_params(),
        row_bytes=row_bytes(), kernels=kernels_per_step(), prompt_tokens=PROMPT_TOKENS,
        codec_kernels=sim_stages.mimi_kernels(sizes()["codec"]), codec_flops=flops, codec_act=act,
    )


def build_profile(gpu_name: str, setting: str) -> dict:
    return sim_unfitted.build_profile(MODEL, gpu_name, setting, terms(gpu_name, setting), FRAMES_REF)


def profile_toml(gpu_name: str, setting: str) -> str:
    t = terms(gpu_name, setting)
    g = GPUS[gpu_name]
    flops, act = codec_frame_cost()
    how = {
        "pessimistic": f"arithmetic row x {ROW_INEFFICIENCY:.1f} (Qwen's H100 fit), codec at half conv "
        "efficiency; nothing fitted",
        "optimistic": "the arithmetic per-row cost, nothing fitted",
    }[setting]
    head = [
        f"Written by `python -m voxcli.bench.calibration --family csm`: CSM-1B on {gpu_name}, "
        f"setting {setting!r}",
        f"row_ms {how}. Derivation and assumptions in models/csm/sim.py's docstring.",
        datasheet_line(g),
        f"a step reads {step_params() / 1e9:.3f} G params (backbone {backbone_params() / 1e9:.3f} G + "
        "31 depth "
        f"passes of {depth_params() / 1e9:.3f} G); {kernels_per_step()} kernels x {LAUNCH_US} us",
        f"decode(b) = floor {t['floor_ms']:.3f} ms + b x row {t['row_ms']:.4f} ms (arithmetic row "
        f"{t['arith_row_ms']:.4f} ms at ctx {CTX_POSITIONS})",
        f"codec: {t['codec_c0_ms']:.3f} ms/call + {t['codec_frame_ms'] * 1e3:.2f} us/frame "
        f"({flops / 1e9:.2f} GFLOP + {act / 1e6:.2f} MB per frame)",
    ]
    return render_profile(head, build_profile(gpu_name, setting), f"csm-{setting}")


CALIBRATION = sim_unfitted.calibration(__doc__ or "", MODEL, profile_toml)
