"""Cost profiles for Zonos v0.1 (transformer) on the simulated GPUs, from arithmetic on published sizes:
NOTHING is fitted (no serving capacity of Zonos has been published). Two settings ship side by side:
  * "pessimistic" (`--gpu h100 --model zonos-v0.1`): the per-row decode cost is the arithmetic one times
    6.2, the factor by which Qwen3-TTS's fitted per-row cost on H100 exceeded its own arithmetic
    (models/sim_priors.py ROW_INEFFICIENCY), carried over as Dia's profile carries it; the DAC runs at half
    the conv efficiency.
  * "optimistic" (`--gpu h100-optimistic`): the arithmetic as is.

Dimensions (family.py ZONOS_V01; models/zonos/tiny.py SIZES["real"]): d_model 2048, 26 layers, 16 query /
4 KV heads of 128, SwiGLU MLP 8192, nine embeddings and nine heads of 1025; DAC 44.1 kHz (Dia's).
Per decode step (b rows; a request is always a CFG pair = 2 rows, each its own full sequence: no work is
shared between the two, unlike Dia's cross-attention):

    decode_ms(b) = backbone weights read once / (BW * BW_EFF)      26 layers (q,k,v,o + MLP) + 9 heads
                 + kernels x LAUNCH_US                             26 x 7 + 3 + 10 (nine embeddings summed,
                                                                   CFG combine, EOS mask, penalty, draw)
                 + b x row_ms                                      row: KV over CTX positions / BW +
                                                                   2 x params FLOPs / FLOP_EFF

Assumptions (stated, not fitted): a typical request is ~3 s of audio (258 frames) from a sentence of ~100
phonemes, so its prefix is PREFIX = 100 + 2 + 6 positions and its average decode context is
CTX = PREFIX + 9 + 129; BW_EFF, FLOP_EFF, LAUNCH_US and the SM scaling are the priors of models/sim_priors.py.
Prefill: both sequences' PREFIX + 1 positions through the backbone (FLOPs) plus one weight read.
Codec: the same DAC 44.1 kHz decoder as Dia's, so its cost is Dia's profile's derivation (models/dia/sim.py
dac_frame_flops), per 48-frame chunk reference.

    .venv/bin/python -m voxcli.bench.calibration --family zonos [--gpu h100]
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

from ..codecs.dac.sim import dac_frame_flops  # the same DAC 44.1 kHz decoder as Dia's, derived once
from ..registry import sim_sizes
from ..sim_calibration import Calibration, Simulator
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
from ..sim_profile import render_profile, stage_profile

MODEL = "zonos-v0.1"
PREFIX = 100 + 2 + 6
CTX_POSITIONS = PREFIX + 9 + 129
SAMPLING_KERNELS = 10
CODEC_KERNELS = 140
SETTINGS = ("pessimistic", "optimistic")


def sizes() -> dict[str, Any]:
    return sim_sizes(MODEL)


def step_params() -> int:
    b = sizes()["backbone"]
    h, hd = b["hidden"], b["head_dim"]
    attn = 2 * h * b["heads"] * hd + 2 * h * b["kv_heads"] * hd
    return b["layers"] * (attn + 3 * h * b["mlp"]) + b["codebooks"] * b["head_vocab"] * h


def row_bytes() -> float:
    b = sizes()["backbone"]
    return b["layers"] * 2 * b["kv_heads"] * b["head_dim"] * BYTES_BF16 * CTX_POSITIONS


def kernels_per_step() -> int:
    return sizes()["backbone"]["layers"] * KERNELS_PER_LAYER + KERNELS_PER_MODEL + SAMPLING_KERNELS


def terms(gpu_name: str, setting: str) -> dict[str, float]:
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {', '.join(SETTINGS)}, got {setting!r}")
    gpu = GPUS[gpu_name]
    bw, fl = gpu.bandwidth * BW_EFF, gpu.flops * FLOP_EFF
    arith_row = (row_bytes() / bw + 2 * step_params() / fl) * 1e3
    floor = step_params() * BYTES_BF16 / bw * 1e3 + kernels_per_step() * LAUNCH_US / 1e3
    conv, act = dac_frame_flops(sizes()["dac"])
    conv_eff = 0.5 if setting == "pessimistic" else 1.0
    return {
        "floor_ms": floor,
        "row_ms": arith_row * (ROW_INEFFICIENCY if setting == "pessimistic" else 1.0),
        "arith_row_ms": arith_row,
        "prefill_ms": floor + 2 * 2 * step_params() * (PREFIX + 1) / fl * 1e3,
        "prefill_token_ms": 2 * step_params() / fl * 1e3,
        "codec_c0_ms": CODEC_KERNELS * LAUNCH_US / 1e3,
        "codec_frame_ms": (conv / (fl * conv_eff) + act / bw) * 1e3,
    }


def build_profile(gpu_name: str, setting: str = "pessimistic") -> dict:
    gpu = GPUS[gpu_name]
    t = terms(gpu_name, setting)
    return stage_profile(
        f"{gpu.name}{'-optimistic' if setting == 'optimistic' else ''}-{MODEL}",
        gpu,
        gpu.paper_split,
        t,
        t["codec_frame_ms"],
        frames_ref=48,
    )


def profile_toml(gpu_name: str, setting: str) -> str:
    t = terms(gpu_name, setting)
    conv, act = dac_frame_flops(sizes()["dac"])
    g = GPUS[gpu_name]
    head = [
        "Written by `python -m voxcli.bench.calibration --family zonos`: Zonos v0.1 (transformer) on "
        f"{gpu_name}, "
        f"setting {setting!r}; NO fitted",
        "parameter (nothing published to fit to); derivation in models/zonos/sim.py.",
        f"{g.name}: {g.sms} SMs, {g.bandwidth / 1e12:.2f} TB/s, {g.flops / 1e12:.0f} TFLOP/s bf16 "
        "(datasheet)",
        f"backbone step reads {step_params() / 1e6:.1f} M params; {kernels_per_step()} kernels x "
        f"{LAUNCH_US} us",
        f"decode(b) = floor {t['floor_ms']:.3f} ms + b x row {t['row_ms']:.4f} ms (arithmetic row "
        f"{t['arith_row_ms']:.4f} ms: KV {row_bytes() / 1e6:.1f} MB/row/step at ctx {CTX_POSITIONS}"
        + (f"; x {ROW_INEFFICIENCY:.1f} carried from Qwen's H100 fit)" if setting == "pessimistic" else ")"),
        "every request is a CFG pair: 2 full rows (nothing shared between its sequences)",
        f"codec: {t['codec_c0_ms']:.3f} ms/call + {t['codec_frame_ms'] * 1e3:.2f} us/frame "
        f"({conv / 1e9:.2f} GFLOP + {act / 1e6:.2f} MB per frame)",
    ]
    return render_profile(head, build_profile(gpu_name, setting), f"zonos-{setting}")


def add_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--gpu", default="h100")


def run(args: argparse.Namespace, sim: Simulator) -> Mapping[str, str]:
    """recipes/gpus/<gpu>-zonos-v0.1.toml (pessimistic, what `--gpu <gpu> --model zonos-v0.1` loads) and
    recipes/gpus/<gpu>-optimistic-zonos-v0.1.toml (`--gpu <gpu>-optimistic`); nothing is simulated."""
    names = {"pessimistic": f"{args.gpu}-{MODEL}", "optimistic": f"{args.gpu}-optimistic-{MODEL}"}
    return {f"recipes/gpus/{name}.toml": profile_toml(args.gpu, setting) for setting, name in names.items()}


CALIBRATION = Calibration(__doc__ or "", add_options, run)
