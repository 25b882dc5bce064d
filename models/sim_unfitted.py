"""What the families whose simulator profiles are arithmetic alone (nothing fitted: CSM, Kyutai TTS,
VibeVoice) share: the two settings shipped side by side, the profiles' names, the datasheet line of their
TOML heads, the calibration command that writes both settings of a GPU, and the stage terms of a model whose
decode step is one weight read plus a per-row cost and whose codec is priced by its FLOPs and activation
traffic.

Each family keeps its own arithmetic (parameter counts, KV bytes, kernels, the codec's cost) and its own
docstring of assumptions; this module only assembles them. Pure arithmetic over models/sim_priors.py.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping

from .sim_calibration import Calibration, Simulator
from .sim_priors import BW_EFF, BYTES_BF16, FLOP_EFF, GPUS, LAUNCH_US, ROW_INEFFICIENCY, GpuSpec
from .sim_profile import stage_profile

SETTINGS = ("pessimistic", "optimistic")


def check_setting(setting: str) -> None:
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {', '.join(SETTINGS)}, got {setting!r}")


def profile_name(gpu_name: str, setting: str, model: str) -> str:
    """recipes/gpus/<this>.toml: `<gpu>-<model>` for the pessimistic default, `<gpu>-optimistic-<model>`."""
    return f"{gpu_name}{'' if setting == 'pessimistic' else '-' + setting}-{model}"


def build_profile(model: str, gpu_name: str, setting: str, t: Mapping[str, float], frames_ref: int,
                  decode_extra: dict | None = None) -> dict:
    """The profile dict of `model` on `gpu_name` in `setting` from its stage terms (`stage_terms` or the
    family's own): the shared layout of sim_profile.stage_profile at the GPU's paper split."""
    g = GPUS[gpu_name]
    name = profile_name(gpu_name, setting, model)
    return stage_profile(name, g, g.paper_split, dict(t), t["codec_frame_ms"], frames_ref, decode_extra)


def datasheet_line(g: GpuSpec) -> str:
    return (f"{g.name}: {g.sms} SMs, {g.bandwidth / 1e12:.2f} TB/s, {g.flops / 1e12:.0f} TFLOP/s bf16 "
            "(datasheet)")


def stage_terms(gpu_name: str, setting: str, *, step_params: int, backbone_params: int, row_bytes: float,
                kernels: int, prompt_tokens: int, codec_kernels: int, codec_flops: float,
                codec_act: float) -> dict[str, float]:
    """The terms `sim_profile.stage_profile` reads, for a step that reads `step_params` weights once plus a
    per-row cost (`row_bytes` of KV and 2 FLOP per parameter read), a prefill of `prompt_tokens` through
    the backbone, and a codec frame of `codec_flops` FLOPs and `codec_act` activation bytes. Pessimistic:
    the row cost x ROW_INEFFICIENCY and the codec's FLOPs at half the prior."""
    check_setting(setting)
    g = GPUS[gpu_name]
    bw, fl = g.bandwidth * BW_EFF, g.flops * FLOP_EFF
    pess = setting == "pessimistic"
    arith = (row_bytes / (g.bandwidth * BW_EFF) + 2 * step_params / (g.flops * FLOP_EFF)) * 1e3
    return {
        "floor_ms": step_params * BYTES_BF16 / bw * 1e3 + kernels * LAUNCH_US / 1e3,
        "row_ms": arith * ROW_INEFFICIENCY if pess else arith,
        "arith_row_ms": arith,
        "prefill_ms": step_params * BYTES_BF16 / bw * 1e3 + prompt_tokens * 2 * backbone_params / fl * 1e3,
        "prefill_token_ms": 2 * backbone_params / fl * 1e3,
        "codec_c0_ms": codec_kernels * LAUNCH_US / 1e3,
        "codec_frame_ms": (codec_flops / (fl * (0.5 if pess else 1.0)) + codec_act / bw) * 1e3,
    }


def calibration(doc: str, model: str, profile_toml: Callable[[str, str], str]) -> Calibration:
    """The family's `vox calibrate` entry: both settings' profiles of `--gpu` (default h100), written as
    recipes/gpus/<profile_name>.toml; no option but the GPU and no simulator run (nothing is fitted)."""

    def add_options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--gpu", default="h100", choices=sorted(GPUS), help="the simulated GPU")

    def run(args: argparse.Namespace, sim: Simulator) -> Mapping[str, str]:
        del sim
        gpu = getattr(args, "gpu", None) or "h100"
        return {f"recipes/gpus/{profile_name(gpu, s, model)}.toml": profile_toml(gpu, s) for s in SETTINGS}

    return Calibration(doc, add_options, run)
