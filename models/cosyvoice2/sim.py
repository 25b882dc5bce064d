"""Cost profiles for CosyVoice2-0.5B on the simulated GPUs, from arithmetic on published sizes
(models/cosyvoice2/family.py: its cosyvoice2.yaml). Nothing is fitted: no published capacity for CosyVoice 2
on our engine exists to fit against. Two settings ship side by side:
  * "pessimistic" (`--gpu h100`, the default), ASSUMED (carried over, not refitted):
      - the flow's achieved share of the FLOP prior = CosyVoice 3's fitted DiT efficiency (0.3423,
        recipes/gpus/h100-cosyvoice3-0.5b.toml), read from that profile's header: the same kind of
        batched 10-step x 2-row flow, so the same losses (gather/scatter, small GEMMs, the last chunk's
        full-attention re-run) are assumed; CosyVoice 2's UNet is narrower (256 channels) and its
        convolutions use tensor cores worse, so this is if anything optimistic for it;
      - the LM's per-row cost x ROW_INEFFICIENCY (Qwen3-TTS's fitted / arithmetic row cost on H100);
      - HiFT's convolutions at a quarter of the prior (as CosyVoice 3's pessimistic profile).
  * "optimistic" (`--gpu h100-optimistic`): the arithmetic at the priors as is.

LM decode step (Qwen2-0.5B: 24 layers, 896 wide, 14/2 heads of 64, MLP 4864; head 896 x 6564):
    decode_ms(b) = weights / (BW * BW_EFF) + kernels x LAUNCH_US + b x row_ms
Prefill: PROMPT_POSITIONS x 2 x params FLOPs + one step.
Codec, per 25 Hz token (two 50 Hz mel frames), as the codec lane runs it (a chunk costs its new frames):
    encoder: per token, 6 conformer layers (q, k, v, o, pos 5 x 512^2 + FFN 2 x 512 x 2048) and, per mel
             frame, 4 more, x 2 FLOPs, plus attention over HISTORY_FRAMES (once per token: no Euler steps)
    UNet: per mel frame, 14 levels x (4 transformer blocks: q, k, v 3 x 256 x 512 + o 512 x 256 + FFN 2 x
          256 x 1024, plus 2 causal convs 3 x 256^2 (the first level's input 320 / 512 wide)) x 2 FLOPs x 10
          Euler steps x 2 CFG rows, plus attention over HISTORY_FRAMES cached frames
    HiFT: CosyVoice 3's convolution count (same HiFT dimensions; centred kernels of the same sizes)
    per call ~ 14 x 4 x 10 x 8 + 200 kernels x LAUNCH_US.
SM scaling: the Amdahl exponents of sim_priors.codec_coefficients / decode_speed (models/sim_profile).

    .venv/bin/python -m voxcli.bench.calibration --family cosyvoice2   # writes both H100 profiles
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from pathlib import Path

from ..flowlm.sim_costs import hift_frame_flops, lm_terms, shipped_fitted
from ..flowlm.sim_costs import lm_params as speech_lm_params
from ..registry import sim_sizes
from ..sim_calibration import Calibration, Simulator
from ..sim_priors import FLOP_EFF, GPUS, LAUNCH_US
from ..sim_profile import render_profile, stage_profile

MODEL = "cosyvoice2-0.5b"
# The LM side (context and prompt positions, the decode step's and prefill's terms) is the library's
# arithmetic on this model's sizes: models/flowlm/sim_costs.py's lm_terms.
HISTORY_FRAMES = 250  # average cached mel frames a chunk's queries attend to (half of a 10 s utterance)
FRAMES_REF = 100  # tokens per chunk the codec rows are quoted for (upstream's steady hop)
SETTINGS = ("pessimistic", "optimistic")
HIFT_EFF_PESSIMISTIC = 0.25
COSYVOICE3_PROFILE = "recipes/gpus/h100-cosyvoice3-0.5b.toml"  # where the carried-over efficiency lives


def sizes() -> dict:
    return sim_sizes(MODEL)


def lm_params() -> int:
    return speech_lm_params(MODEL)


def encoder_token_flops() -> float:
    e, r = sizes()["encoder"], sizes()["token_mel_ratio"]
    d = e["dim"]
    layer = 5 * d * d + 2 * d * e["ffn"]
    first = e["layers"] - e["up_layers"]
    gemm = 2 * layer * (first + r * e["up_layers"]) + 2 * d * d * 5 * r  # + upsample conv (kernel 5)
    attn = 2 * 2 * HISTORY_FRAMES * d * (first + r * e["up_layers"])
    return float(gemm + attn)


def unet_token_flops() -> float:
    u, r = sizes()["unet"], sizes()["token_mel_ratio"]
    c, inner = u["channels"], u["heads"] * u["head_dim"]
    block = 3 * c * inner + inner * c + 2 * c * 4 * c
    convs = 2 * 3 * c * c
    per_frame = 2 * (u["levels"] * (u["blocks"] * block + convs))
    attn = 2 * 2 * HISTORY_FRAMES * inner * u["blocks"] * u["levels"]
    return float((per_frame + attn) * r * u["steps"] * u["cfg_rows"])


def carried_flow_eff(root: Path | None = None) -> float:
    """CosyVoice 3's fitted DiT efficiency, read from its shipped H100 profile's header."""
    base = root or Path(__file__).resolve().parents[2]
    return shipped_fitted((base / COSYVOICE3_PROFILE).read_text(encoding="utf-8"), "dit_eff")


def terms(gpu_name: str, setting: str, flow_eff: float | None = None) -> dict[str, float]:
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {', '.join(SETTINGS)}, got {setting!r}")
    if setting == "pessimistic" and not (flow_eff and 0 < flow_eff <= 1):
        raise ValueError(f"the pessimistic setting needs its flow efficiency in (0, 1], got {flow_eff!r}")
    fl = GPUS[gpu_name].flops * FLOP_EFF
    pess = setting == "pessimistic"
    u = sizes()["unet"]
    eff, hift_eff = (float(flow_eff), HIFT_EFF_PESSIMISTIC) if pess else (1.0, 1.0)  # type: ignore[arg-type]
    flow = encoder_token_flops() + unet_token_flops()
    token_ms = (flow / (fl * eff) + 2 * hift_frame_flops() / (fl * hift_eff)) * 1e3
    return {
        **lm_terms(MODEL, gpu_name, pess),
        "codec_c0_ms": (u["levels"] * u["blocks"] * u["steps"] * 8 + 200) * LAUNCH_US / 1e3,
        "codec_token_ms": token_ms,
        "flow_eff": eff,
    }


def build_profile(gpu_name: str, setting: str, flow_eff: float | None = None) -> dict:
    gpu = GPUS[gpu_name]
    t = terms(gpu_name, setting, flow_eff)
    suffix = "-optimistic" if setting == "optimistic" else ""
    # (44, 88): CosyVoice 3's split (the same codec-heavy shape), for the interference prior
    return stage_profile(f"{gpu.name}{suffix}-{MODEL}", gpu, (44, 88), t, t["codec_token_ms"], FRAMES_REF)


def profile_toml(gpu_name: str, setting: str, flow_eff: float | None = None) -> str:
    t = terms(gpu_name, setting, flow_eff)
    g = GPUS[gpu_name]
    if setting == "pessimistic":
        how = (f"flow_eff {t['flow_eff']!r}: ASSUMED, CosyVoice 3's fitted DiT efficiency carried over; "
               "nothing fitted")
    else:
        how = f"flow_eff {t['flow_eff']!r}: the prior as is; nothing fitted"
    head = [
        "Written by `python -m voxcli.bench.calibration --family cosyvoice2`: CosyVoice2-0.5B on "
        f"{gpu_name}, {setting!r};",
        how + ";",
        "derivation in models/cosyvoice2/sim.py.",
        f"{g.name}: {g.sms} SMs, {g.bandwidth / 1e12:.2f} TB/s, {g.flops / 1e12:.0f} TFLOP/s bf16",
        f"LM step reads {lm_params() / 1e6:.1f} M params; decode(b) = {t['floor_ms']:.3f} ms + b x "
        f"{t['row_ms']:.4f} ms (arithmetic row {t['arith_row_ms']:.4f} ms)",
        f"codec: {t['codec_c0_ms']:.3f} ms/call + {t['codec_token_ms'] * 1e3:.1f} us/token (encoder "
        f"{encoder_token_flops() / 1e9:.2f} + UNet {unet_token_flops() / 1e9:.1f} GFLOP + HiFT "
        f"{2 * hift_frame_flops() / 1e9:.2f} GFLOP per token)",
    ]
    return render_profile(head, build_profile(gpu_name, setting, flow_eff), f"cosyvoice2-{setting}")


def shipped_flow_eff(text: str) -> float:
    found = re.search(r"^# flow_eff ([0-9.]+): ASSUMED", text, re.M)
    if found is None:
        raise ValueError("the profile names no flow_eff in its header")
    return float(found.group(1))


def add_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--flow-eff", type=float, default=None,
                    help="the pessimistic flow efficiency (default: CosyVoice 3's fitted DiT efficiency)")


def run(args: argparse.Namespace, sim: Simulator) -> Mapping[str, str]:
    flow_eff = args.flow_eff if args.flow_eff is not None else carried_flow_eff()
    names = {"pessimistic": f"{args.gpu}-{MODEL}", "optimistic": f"{args.gpu}-optimistic-{MODEL}"}
    return {f"recipes/gpus/{name}.toml":
            profile_toml(args.gpu, setting, flow_eff if setting == "pessimistic" else None)
            for setting, name in names.items()}


CALIBRATION = Calibration(__doc__ or "", add_options, run)
