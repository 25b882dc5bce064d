"""A GPU cost profile as data and as the TOML recipes/gpus/ holds: the shared layout every family's
`sim.py` writes (the engine reads it back with voxcli/sim/cost.py's CostProfile). Pure arithmetic on
a family's derived terms, over the priors of models/sim_priors.py; no torch, no engine.
"""

from __future__ import annotations

import re
from typing import Any

from .sim_priors import CODEC_BATCHES, DECODE_BATCHES, REF_SMS, GpuSpec, codec_coefficients, decode_speed


def codec_call_ms(c0_ms: float, frame_ms: float, frames_ref: int, batch: float, sms: float) -> float:
    """One codec call of `batch` chunks of `frames_ref` frames on `sms` SMs: its launch floor `c0_ms` and
    its per-frame cost, each scaled with the SM count as the paper's codec facts scale
    (`codec_coefficients`: the serial part barely, the per-frame work in proportion)."""
    k = codec_coefficients()
    x = REF_SMS / sms
    return c0_ms * x ** k["m"] + batch * frames_ref * frame_ms * x ** k["k"]


def stage_profile(name: str, gpu: GpuSpec, split: tuple[int, int], t: dict[str, float], codec_frame_ms: float,
                  frames_ref: int, decode_extra: dict | None = None) -> dict:
    """A profile dict ({"gpu", "stages"}) from a model's derived terms (floor_ms, row_ms, prefill_ms,
    prefill_token_ms, codec_c0_ms and the codec's cost per frame): decode per batch and SM count, prefill,
    the codec's launch floor + per-frame cost scaled per SM count (`codec_coefficients`), and the
    interference prior at `split`. Shared by every family but Qwen3-TTS (whose
    profile adds the honest-sim section)."""
    def codec(b: float, s: float) -> float:
        return codec_call_ms(t["codec_c0_ms"], codec_frame_ms, frames_ref, b, s)

    whole = [t["floor_ms"] + b * t["row_ms"] for b in DECODE_BATCHES]
    sm_counts = list(range(8, gpu.sms, 8))
    lm, cd = split
    interference = 2 / (decode_speed(64, lm, gpu.sms) + codec(16, gpu.sms) / codec(16, cd))
    decode: dict[str, Any] = {"batch": list(DECODE_BATCHES), "ms": [round(m, 4) for m in whole]}
    decode.update(decode_extra or {})
    decode["sm_ms"] = {
        str(s): [round(m / decode_speed(b, s, gpu.sms), 4)
                 for b, m in zip(DECODE_BATCHES, whole, strict=True)]
        for s in sm_counts
    }
    return {
        "gpu": {"name": name, "sms": gpu.sms, "interference": round(interference, 4)},
        "stages": {
            "decode": decode,
            "prefill": {
                "batch": [1, 4],
                "ms": [round(t["prefill_ms"], 4)] * 2,
                "per_token_ms": round(t["prefill_token_ms"], 6),
            },
            "codec": {
                "batch": list(CODEC_BATCHES),
                "ms": [round(codec(b, gpu.sms), 4) for b in CODEC_BATCHES],
                "frames_ref": frames_ref,
                "sm_ms": {str(s): [round(codec(b, s), 4) for b in CODEC_BATCHES] for s in sm_counts},
            },
        },
    }


def render_profile(head: list[str], data: dict, calibration: str, gpu_lines: tuple[str, ...] = ()) -> str:
    """A profile dict ({"gpu", "stages"} and optionally "sim") as the TOML recipes/gpus/ holds, under
    comment lines; `gpu_lines` go into [gpu] after its calibration name (e.g. the fitted parameter)."""
    lines = [f"# {s}" for s in head] + ["", "[gpu]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in data["gpu"].items()]
    lines.append(f'calibration = "{calibration}"')
    lines += gpu_lines
    for stage, table in data["stages"].items():
        lines += ["", f"[stages.{stage}]"]
        lines += [f"{k} = {toml_value(v)}" for k, v in table.items() if not isinstance(v, dict)]
        for k, v in table.items():
            if isinstance(v, dict):
                lines += ["", f"[stages.{stage}.{k}]"]
                lines += [f"{kk} = {toml_value(vv)}" for kk, vv in v.items()]
    sim = data.get("sim")
    if sim is not None:
        lines += ["", "[sim]"] + [f"{k} = {toml_value(v)}" for k, v in sim.items() if not isinstance(v, dict)]
        for name, table in sim.items():
            if isinstance(table, dict):
                lines += ["", f"[sim.{name}]"] + [f"{k} = {toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def toml_value(v: object) -> str:
    """A Python value (bool, str, number or a list of them) as TOML writes it."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return repr(v)


def header_value(text: str, name: str, marker: str) -> float:
    """The value a profile's header states as `# <name> <value>: <marker>` (a fitted or carried parameter
    the profile was written with), or ValueError."""
    found = re.search(rf"^# {re.escape(name)} ([0-9.]+): {re.escape(marker)}", text, re.M)
    if found is None:
        raise ValueError(f"the profile names no {marker.lower()} {name} in its header")
    return float(found.group(1))
