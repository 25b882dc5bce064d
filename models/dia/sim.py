"""Cost profiles for Dia-1.6B on the simulated GPUs, from arithmetic on published sizes: NOTHING is fitted.

No serving capacity of Dia has been published (seed 2 reports a speedup, not a capacity), so there is
nothing to fit to. Two settings ship side by side:
  * "pessimistic" (`--gpu h100`): the per-row decode cost is the arithmetic one times 6.2, the factor by
    which Qwen3-TTS's fitted per-row cost on H100 exceeded its own arithmetic (models/qwen3_tts/sim.py, v2:
    0.0835 vs 0.0135 ms). Carried over as is (not refitted): the same serving stack, the same kind of
    inefficiency (small GEMMs, paged-KV gathers, sampling). The DAC runs at half the conv efficiency.
  * "optimistic" (`--gpu h100-optimistic`): the arithmetic as is.

Dimensions (models/dia/family.py, from the published config of nari-labs/Dia-1.6B-0626 and
descript/dac_44khz). Per decode step (b rows; a CFG request is 2 rows, the scheduler counts both):

    decode_ms(b) = decoder weights read once / (BW * BW_EFF)         18 layers: self q,k,v,o + cross q,o
                                                                     + MLP, and logits_dense (9 x 1028)
                 + kernels x LAUNCH_US                               18 x (7 + 3 cross) + 3 + 8 sampling
                 + b x row_ms                                        row: self KV over CTX positions +
                                                                     cross K/V of TEXT tokens (read every
                                                                     step) / BW + 2 x params FLOPs

Assumptions (stated, not fitted): a typical request is ~3 s of audio (258 frames) from TEXT = 100 text
bytes; its average decoder context is CTX = 16 + 129 positions; BW_EFF, FLOP_EFF, LAUNCH_US and the SM
scaling (Amdahl fractions from the paper's 93-99% on 108/132 SMs) are the priors of models/sim_priors.py.

CFG work sharing (models/dia/shared_cross.py): the unconditional sequence's cross-attention block adds
one constant per layer, the same for every request (its text is zeros: the encoder output is one vector
at every position, so the attention over it is V for any query). In rows of the setting's row_ms:
    cfg_row   = what an unconditional sequence still costs: the row less its whole cross-attention (the
                cross K/V read over TEXT tokens and the q/o projections' FLOPs) and less layer 0's
                self-attention (reused from its partner: q/k/v/o FLOPs + that layer's KV read). It keeps
                its own self-attention in layers 1.., the MLP and its logits row (the CFG combine needs
                both full logits rows: its top-k runs over the combined scores)
    cfg_group = once per batch (every pair carries the same `uncond_key`): the kernels the sharing adds
  * optimistic: those arithmetic seconds go, every other term stays: cfg_row = 1 - saved / arith_row;
    no kernel is added (the unconditional rows of the o_proj output buffer hold the constant for the
    batch's life, the existing residual add reads them; layer 0's residual add reads the partner's row).
  * pessimistic: only those same seconds go from the inflated row; the x 6.2 inefficiency (small GEMMs,
    gathers, launches) is assumed to stay whole: cfg_row = 1 - saved / (6.2 x arith_row); and the sharing
    adds one kernel per layer (the constant's add) and one per step (layer 0's result copied to the
    partners), cfg_group = (layers + 1) x LAUNCH_US / row_ms.
  Both: the encoder pass skipped at prefill is not credited (the prefill table is per batch, not per
  sequence), nor the cross pages an unconditional sequence no longer holds (memory, not time).

Prefill: the text encoder (12 layers over TEXT tokens) + the decoder's cross K/V projections + one decoder
step; per prompt position (a voice-clone prefix) one decoder row's FLOPs.

Codec (DAC 44.1 kHz decoder; a chunk of `frames_ref` = 48 frames): per frame the convolutions' FLOPs
(conv1 1024->1536 k7; four blocks of ConvTranspose(2s) + 3 residual units (k7 dilated + k1) at
1536/2^i channels, strides 8, 8, 4, 2; final conv) = ~1.6 GFLOP at FLOP_EFF, plus the snake / add passes
over the activations at BW; per call ~140 kernels (the convs, the activations, the streaming state's
gather/scatter) x LAUNCH_US. On s SMs: serial part x (132/s)^m, per-frame part x (132/s)^k with the
exponents of the paper's codec facts (sim_priors.codec_coefficients), i.e. the same structure as Qwen's.

    .venv/bin/python -m voxcli.bench.calibration --family dia [--gpu h100]
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

MODEL = "dia-1.6b"
TEXT_TOKENS = 100
CTX_POSITIONS = 16 + 129
CROSS_KERNELS = 3  # per layer: norm + Q GEMM, cross attention, O GEMM + residual
SAMPLING_KERNELS = 8  # CFG combine, top-k, channel filter, top-p sort/cumsum, draw, EOS bookkeeping
CODEC_KERNELS = sim_stages.DAC_KERNELS


def sizes() -> dict[str, Any]:
    return sim_sizes(MODEL)


def decoder_step_params() -> int:
    d = sizes()["decoder"]
    h, hd = d["hidden"], d["head_dim"]
    self_attn = 2 * h * d["heads"] * hd + 2 * h * d["kv_heads"] * hd
    cross = 2 * h * d["cross_heads"] * d["cross_head_dim"]  # q and o; cross k/v run at prefill only
    mlp = 3 * h * d["mlp"]
    return d["layers"] * (self_attn + cross + mlp) + h * d["channels"] * d["vocab"]


def prefill_params() -> tuple[int, int]:
    """(encoder params, decoder cross K/V projection params)."""
    e, d = sizes()["encoder"], sizes()["decoder"]
    enc = (
        e["layers"]
        * (
            2 * e["hidden"] * e["heads"] * e["head_dim"]
            + 2 * e["hidden"] * e["kv_heads"] * e["head_dim"]
            + 3 * e["hidden"] * e["mlp"]
        )
        + e["vocab"] * e["hidden"]
    )
    cross_kv = d["layers"] * 2 * e["hidden"] * d["cross_kv_heads"] * d["cross_head_dim"]
    return enc, cross_kv


def row_bytes() -> float:
    """KV bytes one row reads per decode step: self over CTX positions, cross over TEXT tokens."""
    d = sizes()["decoder"]
    self_b = d["layers"] * 2 * d["kv_heads"] * d["head_dim"] * BYTES_BF16 * CTX_POSITIONS
    cross_b = d["layers"] * 2 * d["cross_kv_heads"] * d["cross_head_dim"] * BYTES_BF16 * TEXT_TOKENS
    return self_b + cross_b


def cross_bytes() -> float:
    """Cross K/V bytes one row reads per decode step (over TEXT tokens): none for a shared unconditional
    sequence."""
    d = sizes()["decoder"]
    return d["layers"] * 2 * d["cross_kv_heads"] * d["cross_head_dim"] * BYTES_BF16 * TEXT_TOKENS


def kernels_per_step() -> int:
    d = sizes()["decoder"]
    return d["layers"] * (KERNELS_PER_LAYER + CROSS_KERNELS) + KERNELS_PER_MODEL + SAMPLING_KERNELS


def dac_frame_flops() -> tuple[float, float]:
    """(conv FLOPs, activation bytes) per 512-sample frame of the DAC decoder (models/sim_stages.py)."""
    return sim_stages.dac_frame_cost(sizes()["dac"])


def cfg_terms(bw: float, fl: float, row_ms: float, added_kernels: bool) -> dict[str, float]:
    """cfg_row / cfg_group in rows of `row_ms` (module doc), and the saved milliseconds per pair."""
    d = sizes()["decoder"]
    h, hd = d["hidden"], d["head_dim"]
    cross = (cross_bytes() / bw + 2 * d["layers"] * 2 * h * d["cross_heads"] * d["cross_head_dim"] / fl) * 1e3
    layer0 = (2 * (2 * h * d["heads"] * hd + 2 * h * d["kv_heads"] * hd) / fl
              + 2 * d["kv_heads"] * hd * BYTES_BF16 * CTX_POSITIONS / bw) * 1e3
    kernels = d["layers"] + 1 if added_kernels else 0
    return {"cfg_row": 1.0 - (cross + layer0) / row_ms, "cfg_group": kernels * LAUNCH_US / 1e3 / row_ms,
            "cfg_cross_ms": cross, "cfg_layer0_ms": layer0}


def terms(gpu_name: str, setting: str) -> dict[str, float]:
    sim_unfitted.check_setting(setting)
    gpu = GPUS[gpu_name]
    bw, fl = gpu.bandwidth * BW_EFF, gpu.flops * FLOP_EFF
    arith_row = (row_bytes() / bw + 2 * decoder_step_params() / fl) * 1e3
    enc, cross_kv = prefill_params()
    floor = decoder_step_params() * BYTES_BF16 / bw * 1e3 + kernels_per_step() * LAUNCH_US / 1e3
    conv, act = dac_frame_flops()
    conv_eff = 0.5 if setting == "pessimistic" else 1.0
    row_ms = arith_row * (ROW_INEFFICIENCY if setting == "pessimistic" else 1.0)
    return {
        "floor_ms": floor,
        "row_ms": row_ms,
        **cfg_terms(bw, fl, row_ms, added_kernels=setting == "pessimistic"),
        "arith_row_ms": arith_row,
        "prefill_ms": floor
        + (enc + cross_kv) * BYTES_BF16 / bw * 1e3
        + 2 * (enc + cross_kv) * TEXT_TOKENS / fl * 1e3,
        "prefill_token_ms": 2 * decoder_step_params() / fl * 1e3,
        "codec_c0_ms": CODEC_KERNELS * LAUNCH_US / 1e3,
        "codec_frame_ms": (conv / (fl * conv_eff) + act / bw) * 1e3,
    }


def build_profile(gpu_name: str, setting: str = "pessimistic") -> dict:
    t = terms(gpu_name, setting)
    extra = {"cfg_row": round(t["cfg_row"], 4), "cfg_group": round(t["cfg_group"], 4)}
    return sim_unfitted.build_profile(MODEL, gpu_name, setting, t, 48, decode_extra=extra)


def profile_toml(gpu_name: str, setting: str) -> str:
    t = terms(gpu_name, setting)
    conv, act = dac_frame_flops()
    g = GPUS[gpu_name]
    # The first two lines name the command that writes the profile and the module holding its derivation.
    head = [
        f"Written by `python -m voxcli.bench.calibration --family dia`: Dia-1.6B on {gpu_name}, setting "
        f"{setting!r}; NO fitted",
        "parameter (nothing published to fit to); derivation in models/dia/sim.py.",
        f"{g.name}: {g.sms} SMs, {g.bandwidth / 1e12:.2f} TB/s, {g.flops / 1e12:.0f} TFLOP/s bf16 "
        "(datasheet)",
        f"decoder step reads {decoder_step_params() / 1e6:.1f} M params; {kernels_per_step()} kernels x "
        f"{LAUNCH_US} us",
        f"decode(b) = floor {t['floor_ms']:.3f} ms + b x row {t['row_ms']:.4f} ms (arithmetic row "
        f"{t['arith_row_ms']:.4f} ms: KV {row_bytes() / 1e6:.1f} MB/row/step at ctx {CTX_POSITIONS}, "
        f"text {TEXT_TOKENS}"
        + (
            f"; x {ROW_INEFFICIENCY:.1f} carried from Qwen's H100 fit)"
            if setting == "pessimistic"
            else ")"
        ),
        f"CFG sharing: an unconditional sequence costs {t['cfg_row']:.3f} rows (its cross-attention is one "
        f"constant: no {cross_bytes() / 1e6:.1f} MB cross K/V read, no q/o GEMMs; layer 0's self-attention "
        f"reused), plus {t['cfg_group']:.3f} rows per batch (the kernels it adds)",
        f"codec: {t['codec_c0_ms']:.3f} ms/call + {t['codec_frame_ms'] * 1e3:.2f} us/frame "
        f"({conv / 1e9:.2f} GFLOP + {act / 1e6:.2f} MB per frame)",
    ]
    return render_profile(head, build_profile(gpu_name, setting), f"dia-{setting}")


CALIBRATION = sim_unfitted.calibration(__doc__ or "", MODEL, profile_toml)
