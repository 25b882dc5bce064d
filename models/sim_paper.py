"""The paper-calibrated profile layout (the one Qwen3-TTS's profiles use, recipes/gpus/<gpu>.toml): a
CostShape (models/sim_cost.py) whose decode step takes ONE fitted parameter per calibration, whose codec
is the paper's per-call facts (sim_priors.codec_ms) rather than FLOP arithmetic, and whose profile adds
bytes columns and the honest-sim section ([sim]) that voxcli/sim/cost.py's SimModel reads.

Two calibrations differ only in the backbone step (`PaperFit`):
  v1, "step-floor": decode_ms(b) = step_floor_ms (FITTED) + weights + b x (KV + FLOPs) at the priors;
  v2, "per-row":    decode_ms(b) = weights + kernels x LAUNCH_US + b x row_ms (FITTED on H100; another GPU
                    scales it by its arithmetic per-row cost).
The arithmetic keeps the order of operations of the family module it was moved from, so every profile is
byte-identical to it (benchmarks/profile_hashes.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .sim_cost import CostShape, fill
from .sim_priors import (
    BW_EFF,
    BYTES_BF16,
    CODEC_BATCHES,
    DECODE_BATCHES,
    FLOP_EFF,
    GPUS,
    LAUNCH_US,
    GpuSpec,
    amdahl_p,
    codec_coefficients,
    codec_ms,
    decode_speed,
)
from .sim_profile import render_profile
from .sim_shapes import KvRead
from .sim_stages import kv_bytes

MODELS = ("v1", "v2")  # v1: fitted step_floor_ms; v2: fitted row_ms
FITTED_NAME = {"v1": "step_floor_ms", "v2": "row_ms"}


@dataclass(frozen=True)
class HonestSim:
    """The honest sim model's numbers ([sim.honest]): the codec's memory traffic (no published fact: its
    weights read once per batch, its activations per chunk), the host time per scheduler call and per row
    (measured by `python -m benchmarks bench_scheduler --per-call`), and the device's run-to-run noise."""

    codec_weight_mb: float
    codec_chunk_mb: float
    noise_sigma: float
    host_call_us: float
    host_row_us: float


@dataclass(frozen=True)
class PaperFit:
    """What the paper-calibrated layout adds to a CostShape: the stacks' roles (`talker` read once and
    prefilled, `predictor` run `passes` times a step), the row's K/V read per position (`kv`), the extra
    kernels of the v1 floor's share (`sampling`), and the honest sim's numbers."""

    talker: str
    predictor: str
    kv: KvRead
    sampling: int
    honest: HonestSim


def _sizes(cost: CostShape, fit: PaperFit) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    s = cost.sizes()
    return s[fit.talker], s[fit.predictor]


def decode_terms_ms(cost: CostShape, fit: PaperFit, gpu: GpuSpec, batch: float) -> dict[str, float]:
    """The arithmetic parts of one backbone step (without the fitted floor)."""
    q = cost.quantities()
    talker, predictor = _sizes(cost, fit)
    step = q[f"params_{fit.talker}"] + predictor["passes"] * q[f"params_{fit.predictor}"]
    bw = gpu.bandwidth * BW_EFF
    return {
        "weights": step * BYTES_BF16 / bw * 1e3,
        "kv": batch * _ctx(fit) * kv_bytes(talker, 1) / bw * 1e3,
        "flops": batch * (2 * step) / (gpu.flops * FLOP_EFF) * 1e3,
    }


def _ctx(fit: PaperFit) -> int:
    """The row's talker context (positions the K/V read covers; one for every setting)."""
    positions = fit.kv.positions
    if not isinstance(positions, int):
        raise TypeError("the paper-calibrated layout reads one context length, not one per setting")
    return positions


def kernels_per_step(cost: CostShape, fit: PaperFit) -> dict[str, int]:
    """Sequential kernels of one backbone step (v2's floor): the talker once, the predictor per pass."""
    s = cost.sizes()
    stacks = {st.key: st for st in cost.stacks}
    return {"talker": stacks[fit.talker].kernels(s), "predictor": stacks[fit.predictor].kernels(s)}


def arithmetic_row_ms(cost: CostShape, fit: PaperFit, gpu: GpuSpec) -> float:
    """v1's per-row cost (KV reads + FLOPs at the priors' efficiencies), ms per row per step."""
    t = decode_terms_ms(cost, fit, gpu, 1)
    return t["kv"] + t["flops"]


def v2_floor_ms(cost: CostShape, fit: PaperFit, gpu: GpuSpec) -> float:
    """v2's batch-independent step time: weights once + the kernels' fixed overhead (no fit)."""
    kernels = sum(kernels_per_step(cost, fit).values())
    return decode_terms_ms(cost, fit, gpu, 0)["weights"] + kernels * LAUNCH_US / 1e3


def v2_row_ms(cost: CostShape, fit: PaperFit, gpu: GpuSpec, row_ms_h100: float) -> float:
    """The fitted H100 per-row cost carried to `gpu` in proportion to the arithmetic per-row cost."""
    return row_ms_h100 * arithmetic_row_ms(cost, fit, gpu) / arithmetic_row_ms(cost, fit, GPUS["h100"])


def decode_ms(cost: CostShape, fit: PaperFit, gpu: GpuSpec, batch: float, fitted: float,
              model: str = "v1") -> float:
    """One backbone step on the whole device; `fitted` is step_floor_ms (v1) or H100 row_ms (v2)."""
    if model == "v1":
        return fitted + sum(decode_terms_ms(cost, fit, gpu, batch).values())
    if model == "v2":
        return v2_floor_ms(cost, fit, gpu) + batch * v2_row_ms(cost, fit, gpu, fitted)
    raise ValueError(f"unknown calibration model {model!r}: use one of {', '.join(MODELS)}")


def prefill_fixed_ms(cost: CostShape, fit: PaperFit, gpu: GpuSpec, fitted: float, model: str = "v1") -> float:
    """Batch- and length-independent part of a prefill: the talker's share of the step's fixed cost."""
    talker, predictor = _sizes(cost, fit)
    params = cost.quantities()[f"params_{fit.talker}"]
    talker_weights_ms = params * BYTES_BF16 / (gpu.bandwidth * BW_EFF) * 1e3
    if model == "v2":
        return talker_weights_ms + kernels_per_step(cost, fit)["talker"] * LAUNCH_US / 1e3
    layers = talker["layers"] + predictor["passes"] * predictor["layers"]
    talker_share = (talker["layers"] + 1) / (layers + fit.sampling)
    return fitted * talker_share + talker_weights_ms


def interference(gpu: GpuSpec) -> float:
    """The interference prior at the GPU's paper split, from the paper's codec facts."""
    lm, cd = gpu.paper_split
    lm_speed = decode_speed(64, lm, gpu.sms)
    codec_speed = codec_ms(16, gpu.sms) / codec_ms(16, cd)
    return 2 / (lm_speed + codec_speed)


def decode_bytes_mb(cost: CostShape, fit: PaperFit, batch: float) -> float:
    """Weights once per step plus each row's talker KV reads (the same terms as decode_terms_ms)."""
    q = cost.quantities()
    talker, predictor = _sizes(cost, fit)
    weights = (q[f"params_{fit.talker}"] + predictor["passes"] * q[f"params_{fit.predictor}"]) * BYTES_BF16
    return (weights + batch * _ctx(fit) * kv_bytes(talker, 1)) / 1e6


def sim_section(fit: PaperFit, gpu_name: str) -> dict:
    """The [sim] table: "optimistic" (none of the effects: the paper-calibrated numbers) and "honest"
    (all of them, the default)."""
    gpu, h = GPUS[gpu_name], fit.honest
    return {
        "default": "honest",
        "bandwidth_gbs": round(gpu.bandwidth * BW_EFF / 1e9, 1),
        "optimistic": {},
        "honest": {"urgent_contention": True, "bandwidth_sharing": True, "host": "profile",
                   "host_call_us": h.host_call_us, "host_row_us": h.host_row_us,
                   "noise_sigma": h.noise_sigma},
    }


SIM_LINES = (
    "Sim models ([sim]; `--set sim_model=optimistic|honest`, default honest):",
    " optimistic = the paper-calibrated table alone: the urgent lane keeps whole-device speed beside",
    "  both partitions, partitions never contend for memory, host time is free, the device takes exactly",
    "  the estimate. It reproduces the calibration's numbers.",
    " honest adds, each a flag:",
    "  urgent_contention: the urgent lane runs on SMs the partitions' resident blocks occupy; stream",
    "   priority orders block launches but does not preempt, so it is slowed by `interference` ("
    "{interference:.3f}) like any two lanes sharing SMs;",
    "  bandwidth_sharing: lanes split {bandwidth/1e12:.2f} TB/s x BW_EFF {bw_eff} = {bw/1e12:.2f} TB/s; a "
    "batch streams",
    "   memory a fraction f = bytes / bandwidth / time of its life and is slowed by 1 + f x sum(f of the",
    "   other running lanes). bytes_mb: decode = weights once + rows x ctx x KV/token (as decode_ms);",
    "   codec = {codec_weight_mb:.0f} MB weights + {codec_chunk_mb:.0f} MB activations per chunk (assumed: "
    "no published codec traffic);",
    "  host = profile: {host_call_us} us per scheduler call + {host_row_us} us per batch row, ~200 us",
    "   per LM step at 256 rows (thread CPU time, python -m benchmarks bench_scheduler, dev box);",
    "   host = \"measured\" charges each call's live thread CPU time instead (not reproducible);",
    "  noise_sigma {noise_sigma}: each batch takes the table time x lognormal(mean 1, sigma), seeded by "
    "config.seed, so",
    "   the scheduler's estimates are right only on average.",
)


def sim_lines(fit: PaperFit, gpu_name: str) -> list[str]:
    """Why each sim effect is there and where its number comes from (profile header comments)."""
    gpu, h = GPUS[gpu_name], fit.honest
    values = {"interference": interference(gpu), "bandwidth": gpu.bandwidth, "bw_eff": BW_EFF,
              "bw": gpu.bandwidth * BW_EFF, **h.__dict__}
    return [fill(line, values) for line in SIM_LINES]


def build_profile(cost: CostShape, fit: PaperFit, gpu_name: str, fitted: float, model: str = "v1") -> dict:
    """A CostProfile dict (TOML layout of voxcli/sim/cost.py) for `gpu_name`; `fitted` is the one
    fitted parameter of calibration `model` (step_floor_ms for v1, H100 row_ms for v2)."""
    gpu = GPUS[gpu_name]
    h = fit.honest
    sm_counts = [s for s in range(8, gpu.sms, 8)]
    whole = [decode_ms(cost, fit, gpu, b, fitted, model) for b in DECODE_BATCHES]
    decode = {
        "batch": list(DECODE_BATCHES),
        "ms": [round(m, 4) for m in whole],
        "bytes_mb": [round(decode_bytes_mb(cost, fit, b), 1) for b in DECODE_BATCHES],
        "sm_ms": {
            str(s): [
                round(m / decode_speed(b, s, gpu.sms), 4) for b, m in zip(DECODE_BATCHES, whole, strict=True)
            ]
            for s in sm_counts
        },
    }
    talker_params = cost.quantities()[f"params_{fit.talker}"]
    prefill = {
        "batch": [1, 4],
        "ms": [round(prefill_fixed_ms(cost, fit, gpu, fitted, model), 4)] * 2,
        "per_token_ms": round(2 * talker_params / (gpu.flops * FLOP_EFF) * 1e3, 6),
    }
    codec = {
        "batch": list(CODEC_BATCHES),
        "ms": [round(codec_ms(b, gpu.sms, gpu.codec_per_sm), 4) for b in CODEC_BATCHES],
        "frames_ref": cost.frames_ref,
        "bytes_mb": [round(h.codec_weight_mb + h.codec_chunk_mb * b, 1) for b in CODEC_BATCHES],
        "sm_ms": {str(s): [round(codec_ms(b, s, gpu.codec_per_sm), 4) for b in CODEC_BATCHES]
                   for s in sm_counts},
    }
    return {
        "gpu": {"name": gpu.name, "sms": gpu.sms, "interference": round(interference(gpu), 4)},
        "stages": {"decode": decode, "prefill": prefill, "codec": codec},
        "sim": sim_section(fit, gpu_name),
    }


def derivation_lines(cost: CostShape, fit: PaperFit, gpu_name: str, fitted: float,
                     model: str = "v1") -> list[str]:
    """Human-readable derivation, written as comments at the top of the recipe."""
    gpu = GPUS[gpu_name]
    c = codec_coefficients()
    t = decode_terms_ms(cost, fit, gpu, 64)
    k = kernels_per_step(cost, fit)
    q = cost.quantities()
    talker, predictor = _sizes(cost, fit)
    if model == "v1":
        step = (
            f"decode(64) = floor {fitted:.3f} (fitted) + weights {t['weights']:.3f} + kv {t['kv']:.3f} "
            f"+ flops {t['flops']:.3f} ms  (BW_EFF {BW_EFF}, FLOP_EFF {FLOP_EFF})"
        )
    else:
        row = v2_row_ms(cost, fit, gpu, fitted)
        arith = arithmetic_row_ms(cost, fit, gpu)
        step = (
            f"decode(b) = weights {t['weights']:.3f} + {k['talker']}+{k['predictor']} kernels x "
            f"{LAUNCH_US} us = {v2_floor_ms(cost, fit, gpu):.3f} ms + b x row {row:.4f} ms "
            f"(H100 row_ms {fitted} fitted; {row / arith:.1f}x the arithmetic {arith:.4f})"
        )
    return [
        f"{gpu.name}: {gpu.sms} SMs, {gpu.bandwidth / 1e12:.2f} TB/s, {gpu.flops / 1e12:.0f} TFLOP/s bf16 "
        "(datasheet)",
        f"talker {q[f'params_{fit.talker}'] / 1e6:.1f} M params, predictor pass "
        f"{q[f'params_{fit.predictor}'] / 1e6:.1f} M x {predictor['passes']}, "
        f"KV {kv_bytes(talker, 1) / 1024:.0f} KiB/token, ctx {_ctx(fit)}",
        step,
        f"SM scaling: Amdahl p {amdahl_p(1):.3f} (batch 1) .. {amdahl_p(256):.3f} (batch 256) from "
        "99%/93% on 108/132",
        f"codec: c0 {c['c0']:.3f} ms x (132/s)^{c['m']:.3f} + c1 {c['c1']:.3f} ms/chunk x "
        f"(132/s)^{c['k']:.3f}" + ("" if gpu.codec_per_sm == 1.0 else
                                   f", / codec_per_sm {gpu.codec_per_sm} (assumed: see calibrate.py)"),
        f"interference {interference(gpu):.3f} = 2 / (lm speed on {gpu.paper_split[0]} + "
        f"codec speed on {gpu.paper_split[1]} SMs)",
    ]


def profile_toml(cost: CostShape, fit: PaperFit, gpu_name: str, fitted: float,
                 header: list[str] | None = None, model: str = "v1") -> str:
    """The profile as TOML text with its derivation as comments."""
    head = [*(header or []), *derivation_lines(cost, fit, gpu_name, fitted, model), *sim_lines(fit, gpu_name)]
    fitted_line = f"{FITTED_NAME[model]} = {fitted!r}  # the one fitted parameter (see header)"
    return render_profile(head, build_profile(cost, fit, gpu_name, fitted, model), model, (fitted_line,))
