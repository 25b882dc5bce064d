"""Cost profiles for the simulated GPUs (Qwen3-TTS 1.7B), derived from micro facts only.

Nothing here is fitted to a capacity except ONE parameter per calibration; everything else comes from
published per-call latencies, the SM-scaling fact, datasheet bandwidth/FLOPs and FLOP/byte arithmetic on
the model's dimensions. `run` (models/qwen3_tts/sim_fit.py, `python -m voxcli.bench.calibration
--family qwen3_tts`) fits that one parameter against ONE published capacity
point and then predicts the others with the simulator. Two calibrations differ only in the backbone step
(LM lane: talker step + 15 depth-transformer passes + 16 samplings, whole device):

v1, "step-floor" (fitted: `step_floor_ms`, against sync2 @ 90% = 38 req/s):

    decode_ms(b) = step_floor_ms                                  # latency floor: ~770 sequential
                                                                  # kernels + 16 samplings (FITTED)
                 + weight_bytes / (BW * BW_EFF)                   # every weight read once per step
                 + b * ctx * kv_bytes_per_token / (BW * BW_EFF)   # talker KV reads per row
                 + b * flops_per_row / (FLOPS * FLOP_EFF)         # 2 FLOP per parameter per row

v2, "per-row" (fitted: `row_ms`, the marginal cost of one more row in a step, against full @ 90% =
48 req/s on H100). The floor is arithmetic instead of fitted:

    decode_ms(b) = weight_bytes / (BW * BW_EFF)                   # 1.98 ms on H100
                 + kernels_per_step * LAUNCH_US                   # 769 kernels x 2.5 us = 1.92 ms
                 + b * row_ms                                     # FITTED (H100); other GPUs scale it
                                                                  # by their arithmetic per-row cost
    kernels_per_step = 28 talker layers x 7 + 3  +  15 passes x (5 layers x 7 + 3) = 199 + 570 = 769,
    7 kernels per fused layer (norm+QKV GEMM, RoPE+KV append, attention, O-proj+residual, norm+gate/up
    GEMM, SiLU*mul, down+residual) and 3 per model/pass (embedding/projection, norm+head, sampling);
    LAUNCH_US = 2.5 us is the gap plus ramp/drain of one small kernel replayed from a CUDA graph on
    Hopper (a prior, like BW_EFF). v2 tests the diagnosis that v1's per-row cost (KV + FLOPs at 50% of
    peak: 0.0135 ms/row on H100) is several times too cheap, so that v1's backbone is never the
    bottleneck of the split design.

The SM scaling, the codec and the interference prior are the shared ones (models/sim_priors.py).

same step floor (same kernel count, similar clocks); v2 the same per-kernel overhead and a per-row cost
scaled like the arithmetic one (the fitted inefficiency carries over). Both take the codec's per-SM speed
equal to H100's (no codec micro facts exist for them): stated assumptions, checked against the paper's
B200 result where possible.

116/16 (issue 17; paper 34 req/s): at 60 s per rate the honest sim serves 27 (optimistic: 28), 1.05x the
16-SM codec's own bound (25.6 req/s from the §2.3 latencies above), where the paper's 34 is 1.33x it: the
real device had the whole-GPU urgent lane decode a quarter of the chunks. The sim's urgent lane has the
room (8 chunks in 5.7 ms on the whole device) but gets few of them: a background batch of 32 chunks takes
143 ms on 16 SMs, longer than the urgent margin (100 ms), so the chunks it launches whose deadlines are
100-143 ms away finish late (stalls) instead of turning urgent. Not a cost-table effect: the background
lane's batch choice (scheduler.py `_background_batch`, leaving to the urgent lane what a batch would make
late) is what would change it; not tuned here, since nothing published gives the paper's batch rule.

B200's codec (issue 17), two settings side by side:
  b200              optimistic: the codec's per-SM speed is H100's (`codec_per_sm` 1.0; a Blackwell SM
                    is no slower than a Hopper SM at the same clocks). The codec on 64 SMs then sustains
                    ~99 req/s, the split rule of the paper (§3.1: the split that gives the backbone the most
                    throughput while the codec keeps up at the target load) would pick 48/96, not 84/64,
                    and 84/64 simulates at ~2x the published 52 req/s.
  b200-pessimistic  `codec_per_sm` 0.565: what the paper's own choice implies. 84/64 chosen at ~52 req/s
                    means a 64-SM codec keeps up there and a 56-SM one does not: 64 x 1.54 x f >= 52 >
                    56 x 1.54 x f (1.54 req/s per SM: H100's codec bound per SM), f in [0.53, 0.60), the
                    middle taken. It is a second parameter read off the B200 result (no B200 codec latency
                    is published); what would replace it: a measured B200 codec latency at 1 and 16 chunks
                    (scripts/gpu_check.py writes recipes/gpus/<gpu>.measured.toml), e.g. kernels tuned for
                    Hopper (PyTorch 2.8 / CUDA 12.8 on early Blackwell) running the codec at half speed.
"""

from __future__ import annotations

from typing import Any

from ..registry import find_sim_model
from ..sim_priors import (
    BW_EFF,
    BYTES_BF16,
    CODEC_BATCHES,
    DECODE_BATCHES,
    FLOP_EFF,
    GPUS,
    KERNELS_PER_LAYER,
    KERNELS_PER_MODEL,
    LAUNCH_US,
    GpuSpec,
    amdahl_p,
    codec_coefficients,
    codec_ms,
    decode_speed,
)
from ..sim_profile import render_profile
from ..sim_stages import kv_bytes, stack_params

# --- Qwen3-TTS 1.7B dimensions: the sim model its family registers (models/qwen3_tts/family.py) -------
MODEL = "qwen3-tts-1.7b"


def _sim_model() -> tuple[Any, Any]:
    found = find_sim_model(MODEL)
    if found is None:
        raise LookupError(f"no registered family has the sim model {MODEL!r} (models/registry.py)")
    return found


_FAMILY, _SIM = _sim_model()
TALKER: dict[str, int] = dict(_SIM.sizes["talker"])
PREDICTOR: dict[str, int] = dict(_SIM.sizes["predictor"])
CHUNK_FRAMES = _FAMILY.sim.chunk.steady  # the paper's chunks (10 frames), as the family's sim schedule


def talker_params() -> int:
    return stack_params(TALKER, TALKER["codec_vocab"])


def predictor_pass_params() -> int:
    """Weights one depth-transformer pass reads: its layers, the 2048->1024 projection, one lm head."""
    p = PREDICTOR
    return stack_params(p, p["vocab"]) + p["talker_hidden"] * p["hidden"]


def kv_bytes_per_token() -> int:
    return kv_bytes(TALKER, 1)


CTX_TOKENS = 64  # average talker context per row during decode (~10 prompt rows + half of ~98 frames)
MODELS = ("v1", "v2")  # v1: fitted step_floor_ms; v2: fitted row_ms (see the module docstring)
FITTED_NAME = {"v1": "step_floor_ms", "v2": "row_ms"}


def decode_terms_ms(gpu: GpuSpec, batch: float) -> dict[str, float]:
    """The arithmetic parts of one backbone step (without the fitted floor)."""
    weights = (talker_params() + PREDICTOR["passes"] * predictor_pass_params()) * BYTES_BF16
    flops_row = 2 * (talker_params() + PREDICTOR["passes"] * predictor_pass_params())
    bw = gpu.bandwidth * BW_EFF
    return {
        "weights": weights / bw * 1e3,
        "kv": batch * CTX_TOKENS * kv_bytes_per_token() / bw * 1e3,
        "flops": batch * flops_row / (gpu.flops * FLOP_EFF) * 1e3,
    }


def kernels_per_step() -> dict[str, int]:
    """Sequential kernels of one backbone step (v2's floor): the talker once, the predictor 15 times."""
    talker = TALKER["layers"] * KERNELS_PER_LAYER + KERNELS_PER_MODEL
    predictor = PREDICTOR["passes"] * (PREDICTOR["layers"] * KERNELS_PER_LAYER + KERNELS_PER_MODEL)
    return {"talker": talker, "predictor": predictor}


def arithmetic_row_ms(gpu: GpuSpec) -> float:
    """v1's per-row cost (KV reads + FLOPs at the priors' efficiencies), ms per row per step."""
    t = decode_terms_ms(gpu, 1)
    return t["kv"] + t["flops"]


def v2_floor_ms(gpu: GpuSpec) -> float:
    """v2's batch-independent step time: weights once + the kernels' fixed overhead (no fit)."""
    return decode_terms_ms(gpu, 0)["weights"] + sum(kernels_per_step().values()) * LAUNCH_US / 1e3


def v2_row_ms(gpu: GpuSpec, row_ms_h100: float) -> float:
    """The fitted H100 per-row cost carried to `gpu` in proportion to the arithmetic per-row cost."""
    return row_ms_h100 * arithmetic_row_ms(gpu) / arithmetic_row_ms(GPUS["h100"])


def decode_ms(gpu: GpuSpec, batch: float, fitted: float, model: str = "v1") -> float:
    """One backbone step on the whole device; `fitted` is step_floor_ms (v1) or H100 row_ms (v2)."""
    if model == "v1":
        return fitted + sum(decode_terms_ms(gpu, batch).values())
    if model == "v2":
        return v2_floor_ms(gpu) + batch * v2_row_ms(gpu, fitted)
    raise ValueError(f"unknown calibration model {model!r}: use one of {', '.join(MODELS)}")


def prefill_fixed_ms(gpu: GpuSpec, fitted: float, model: str = "v1") -> float:
    """Batch- and length-independent part of a prefill: the talker's share of the step's fixed cost."""
    talker_weights_ms = talker_params() * BYTES_BF16 / (gpu.bandwidth * BW_EFF) * 1e3
    if model == "v2":
        return talker_weights_ms + kernels_per_step()["talker"] * LAUNCH_US / 1e3
    layers = TALKER["layers"] + PREDICTOR["passes"] * PREDICTOR["layers"]
    talker_share = (TALKER["layers"] + 1) / (layers + 16)
    return fitted * talker_share + talker_weights_ms


def interference(gpu: GpuSpec) -> float:
    lm, cd = gpu.paper_split
    lm_speed = decode_speed(64, lm, gpu.sms)
    codec_speed = codec_ms(16, gpu.sms) / codec_ms(16, cd)
    return 2 / (lm_speed + codec_speed)


# --- the sim's fidelity models (SimModel in voxcli/sim/cost.py) -----------------------------------
# Codec traffic (assumptions, no published fact): weights ~100 M params bf16 read once per batch, and
# the activations of a convolutional decoder upsampling 10 frames to 19,200 samples, ~4 levels of
# equal-sized feature maps read and written ~10 times each in bf16: ~150 MB per chunk.
CODEC_WEIGHT_MB = 200.0
CODEC_CHUNK_MB = 150.0
NOISE_SIGMA = 0.1  # device time / table time, lognormal (the default; kernels vary ~10% run to run)
# Host time per scheduler call (thread CPU time, `python -m benchmarks bench_scheduler --per-call` on the
# 2-core dev box at 256 running rows, after vectorisation): a fixed part plus a part per row of the batch.
HOST_CALL_US = 20.0
HOST_ROW_US = 0.3


def decode_bytes_mb(batch: float) -> float:
    """Weights once per step plus each row's talker KV reads (the same terms as decode_terms_ms)."""
    weights = (talker_params() + PREDICTOR["passes"] * predictor_pass_params()) * BYTES_BF16
    return (weights + batch * CTX_TOKENS * kv_bytes_per_token()) / 1e6


def codec_bytes_mb(chunks: float) -> float:
    return CODEC_WEIGHT_MB + CODEC_CHUNK_MB * chunks


def sim_section(gpu_name: str) -> dict:
    """The [sim] table: "optimistic" (none of the effects: the paper-calibrated numbers) and "honest"
    (all of them, the default)."""
    gpu = GPUS[gpu_name]
    return {
        "default": "honest",
        "bandwidth_gbs": round(gpu.bandwidth * BW_EFF / 1e9, 1),
        "optimistic": {},
        "honest": {"urgent_contention": True, "bandwidth_sharing": True, "host": "profile",
                   "host_call_us": HOST_CALL_US, "host_row_us": HOST_ROW_US, "noise_sigma": NOISE_SIGMA},
    }


def sim_lines(gpu_name: str) -> list[str]:
    """Why each sim effect is there and where its number comes from (profile header comments)."""
    gpu = GPUS[gpu_name]
    return [
        "Sim models ([sim]; `--set sim_model=optimistic|honest`, default honest):",
        " optimistic = the paper-calibrated table alone: the urgent lane keeps whole-device speed beside",
        "  both partitions, partitions never contend for memory, host time is free, the device takes exactly",
        "  the estimate. It reproduces the calibration's numbers.",
        " honest adds, each a flag:",
        "  urgent_contention: the urgent lane runs on SMs the partitions' resident blocks occupy; stream",
        f"   priority orders block launches but does not preempt, so it is slowed by `interference` "
        f"({interference(gpu):.3f}) like any two lanes sharing SMs;",
        f"  bandwidth_sharing: lanes split {gpu.bandwidth / 1e12:.2f} TB/s x BW_EFF {BW_EFF} = "
        f"{gpu.bandwidth * BW_EFF / 1e12:.2f} TB/s; a batch streams",
        "   memory a fraction f = bytes / bandwidth / time of its life and is slowed by 1 + f x sum(f of the",
        "   other running lanes). bytes_mb: decode = weights once + rows x ctx x KV/token (as decode_ms);",
        f"   codec = {CODEC_WEIGHT_MB:.0f} MB weights + {CODEC_CHUNK_MB:.0f} MB activations per chunk "
        "(assumed: no published codec traffic);",
        f"  host = profile: {HOST_CALL_US} us per scheduler call + {HOST_ROW_US} us per batch row, ~200 us",
        "   per LM step at 256 rows (thread CPU time, python -m benchmarks bench_scheduler, dev box);",
        "   host = \"measured\" charges each call's live thread CPU time instead (not reproducible);",
        f"  noise_sigma {NOISE_SIGMA}: each batch takes the table time x lognormal(mean 1, sigma), seeded by "
        "config.seed, so",
        "   the scheduler's estimates are right only on average.",
    ]


def build_profile(gpu_name: str, fitted: float, model: str = "v1") -> dict:
    """A CostProfile dict (TOML layout of voxcli/sim/cost.py) for `gpu_name`; `fitted` is the one
    fitted parameter of calibration `model` (step_floor_ms for v1, H100 row_ms for v2)."""
    gpu = GPUS[gpu_name]
    sm_counts = [s for s in range(8, gpu.sms, 8)]
    whole = [decode_ms(gpu, b, fitted, model) for b in DECODE_BATCHES]
    decode = {
        "batch": list(DECODE_BATCHES),
        "ms": [round(m, 4) for m in whole],
        "bytes_mb": [round(decode_bytes_mb(b), 1) for b in DECODE_BATCHES],
        "sm_ms": {
            str(s): [
                round(m / decode_speed(b, s, gpu.sms), 4) for b, m in zip(DECODE_BATCHES, whole, strict=True)
            ]
            for s in sm_counts
        },
    }
    prefill = {
        "batch": [1, 4],
        "ms": [round(prefill_fixed_ms(gpu, fitted, model), 4)] * 2,
        "per_token_ms": round(2 * talker_params() / (gpu.flops * FLOP_EFF) * 1e3, 6),
    }
    codec = {
        "batch": list(CODEC_BATCHES),
        "ms": [round(codec_ms(b, gpu.sms, gpu.codec_per_sm), 4) for b in CODEC_BATCHES],
        "frames_ref": CHUNK_FRAMES,
        "bytes_mb": [round(codec_bytes_mb(b), 1) for b in CODEC_BATCHES],
        "sm_ms": {str(s): [round(codec_ms(b, s, gpu.codec_per_sm), 4) for b in CODEC_BATCHES]
                   for s in sm_counts},
    }
    return {
        "gpu": {"name": gpu.name, "sms": gpu.sms, "interference": round(interference(gpu), 4)},
        "stages": {"decode": decode, "prefill": prefill, "codec": codec},
        "sim": sim_section(gpu_name),
    }


def derivation_lines(gpu_name: str, fitted: float, model: str = "v1") -> list[str]:
    """Human-readable derivation, written as comments at the top of the recipe."""
    gpu = GPUS[gpu_name]
    c = codec_coefficients()
    t = decode_terms_ms(gpu, 64)
    k = kernels_per_step()
    if model == "v1":
        step = (
            f"decode(64) = floor {fitted:.3f} (fitted) + weights {t['weights']:.3f} + kv {t['kv']:.3f} "
            f"+ flops {t['flops']:.3f} ms  (BW_EFF {BW_EFF}, FLOP_EFF {FLOP_EFF})"
        )
    else:
        row = v2_row_ms(gpu, fitted)
        step = (
            f"decode(b) = weights {t['weights']:.3f} + {k['talker']}+{k['predictor']} kernels x "
            f"{LAUNCH_US} us = {v2_floor_ms(gpu):.3f} ms + b x row {row:.4f} ms "
            f"(H100 row_ms {fitted} fitted; "
            f"{row / arithmetic_row_ms(gpu):.1f}x the arithmetic {arithmetic_row_ms(gpu):.4f})"
        )
    return [
        f"{gpu.name}: {gpu.sms} SMs, {gpu.bandwidth / 1e12:.2f} TB/s, {gpu.flops / 1e12:.0f} TFLOP/s bf16 "
        "(datasheet)",
        f"talker {talker_params() / 1e6:.1f} M params, predictor pass {predictor_pass_params() / 1e6:.1f} M "
        "x 15, "
        f"KV {kv_bytes_per_token() / 1024:.0f} KiB/token, ctx {CTX_TOKENS}",
        step,
        f"SM scaling: Amdahl p {amdahl_p(1):.3f} (batch 1) .. {amdahl_p(256):.3f} (batch 256) from "
        "99%/93% on 108/132",
        f"codec: c0 {c['c0']:.3f} ms x (132/s)^{c['m']:.3f} + c1 {c['c1']:.3f} ms/chunk x "
        f"(132/s)^{c['k']:.3f}" + ("" if gpu.codec_per_sm == 1.0 else
                                   f", / codec_per_sm {gpu.codec_per_sm} (assumed: see calibrate.py)"),
        f"interference {interference(gpu):.3f} = 2 / (lm speed on {gpu.paper_split[0]} + "
        f"codec speed on {gpu.paper_split[1]} SMs)",
    ]


def profile_toml(gpu_name: str, fitted: float, header: list[str] | None = None, model: str = "v1") -> str:
    """The profile as TOML text with its derivation as comments."""
    head = [*(header or []), *derivation_lines(gpu_name, fitted, model), *sim_lines(gpu_name)]
    fitted_line = f"{FITTED_NAME[model]} = {fitted!r}  # the one fitted parameter (see header)"
    return render_profile(head, build_profile(gpu_name, fitted, model), model, (fitted_line,))


