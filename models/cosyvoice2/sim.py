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
from collections.abc import Mapping
from pathlib import Path

from ..sim_calibration import Calibration, Simulator
from ..sim_codecs import conformer_token_flops, unet_kernels, unet_token_flops
from ..sim_cost import DATASHEET_BARE, CostShape
from ..sim_profile import header_value
from ..sim_shapes import Fit, FlowCodec, KvRead, Prefill, Stack
from ..sim_stages import hift_frame_flops

MODEL = "cosyvoice2-0.5b"
# The LM side (a Qwen2-0.5B step) under CosyVoice 3's assumptions: a prompt of ~75 prompt-text + text ids
# and ~75 prompt speech tokens, and half of a 10 s utterance decoded on average.
CTX_POSITIONS = 150 + 125
PROMPT_POSITIONS = 150
HISTORY_FRAMES = 250  # average cached mel frames a chunk's queries attend to (half of a 10 s utterance)
COSYVOICE3_PROFILE = "recipes/gpus/h100-cosyvoice3-0.5b.toml"  # where the carried-over efficiency lives

COST = CostShape(
    model=MODEL,
    label="cosyvoice2",
    stacks=(Stack("lm", head=("vocab",), sampling=6),),  # the fused layer's 7 kernels; embedding/head + 6
    row_reads=(KvRead("kv", "lm", CTX_POSITIONS),),
    prefill=Prefill(PROMPT_POSITIONS),
    # HiFT: CosyVoice 3's dimensions (base 512, rates 8/5/3)
    codec=FlowCodec(flow=(("encoder", conformer_token_flops), ("unet", unet_token_flops)),
                    history=HISTORY_FRAMES, vocoder_key="hift", vocoder=hift_frame_flops,
                    kernels=unet_kernels, eff="flow_eff"),
    frames_ref=100,  # tokens per chunk the codec rows are quoted for (upstream's steady hop)
    fit=Fit("pessimistic", "eff", "flow efficiency"),
    split=(44, 88),  # CosyVoice 3's split (the same codec-heavy shape), for the interference prior
    per_setting={"how": {
        "pessimistic": "flow_eff {flow_eff!r}: ASSUMED, CosyVoice 3's fitted DiT efficiency carried over; "
        "nothing fitted",
        "optimistic": "flow_eff {flow_eff!r}: the prior as is; nothing fitted",
    }},
    head=(
        "Written by `python -m voxcli.bench.calibration --family cosyvoice2`: CosyVoice2-0.5B on {gpu}, "
        "{setting!r};",
        "{how};",
        "derivation in models/cosyvoice2/sim.py.",
        DATASHEET_BARE,
        "LM step reads {params_lm/1e6:.1f} M params; decode(b) = {floor_ms:.3f} ms + b x {row_ms:.4f} ms "
        "(arithmetic row {arith_row_ms:.4f} ms)",
        "codec: {codec_c0_ms:.3f} ms/call + {codec_token_ms*1e3:.1f} us/token (encoder "
        "{flops_encoder/1e9:.2f} + UNet {flops_unet/1e9:.1f} GFLOP + HiFT {vocoder_flops/1e9:.2f} GFLOP per "
        "token)",
    ),
)
terms, build_profile, profile_toml = COST.terms, COST.build_profile, COST.profile_toml


def carried_flow_eff(root: Path | None = None) -> float:
    """CosyVoice 3's fitted DiT efficiency, read from its shipped H100 profile's header."""
    base = root or Path(__file__).resolve().parents[2]
    return header_value((base / COSYVOICE3_PROFILE).read_text(encoding="utf-8"), "dit_eff", "FITTED")


def shipped_flow_eff(text: str) -> float:
    return header_value(text, "flow_eff", "ASSUMED")


def add_options(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--flow-eff", type=float, default=None,
                    help="the pessimistic flow efficiency (default: CosyVoice 3's fitted DiT efficiency)")


def run(args: argparse.Namespace, sim: Simulator) -> Mapping[str, str]:
    flow_eff = args.flow_eff if args.flow_eff is not None else carried_flow_eff()
    return COST.profiles(args.gpu, flow_eff)


CALIBRATION = Calibration(__doc__ or "", add_options, run)
