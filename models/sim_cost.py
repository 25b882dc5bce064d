"""One parametric cost model: a family's simulator cost is the sizes and stage shapes it declares.

A family's `sim.py` holds one `COST = CostShape(...)` made of the stage shapes of models/sim_shapes.py: the
LM stacks a decode step reads (a decoder stack of its sizes, or a library shape such as a diffusion head,
each with its head rows and how often a step reads it), the bytes a row reads (K/V caches, a logits row),
its prefill, its codec as a named shape of models/sim_stages.py or models/sim_codecs.py, the chunk
reference, the one parameter a setting may take from a fit, and the TOML head as template lines with named
placeholders. This module computes, from the declaration and the sizes of models/<family>/family.py, the
terms, the profile dict and the TOML text of every GPU x setting; the family's module keeps its docstring
of assumptions, which is its documentation. The priors are models/sim_priors.py's; the paper-calibrated
layout of Qwen3-TTS's profiles (a fitted decode step, the codec's published facts, the [sim] section) is
models/sim_paper.py's, over the same declaration.

The arithmetic keeps the order of operations of the per-family copies it replaces (integer counts stay
integers until they are divided), so every shipped profile is byte-identical
(benchmarks/profile_hashes.py).
"""

from __future__ import annotations

import argparse
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .registry import sim_sizes
from .sim_calibration import Calibration, Simulator
from .sim_priors import (
    BW_EFF,
    BYTES_BF16,
    FLOP_EFF,
    GPUS,
    LAUNCH_US,
    ROW_INEFFICIENCY,
    codec_coefficients,
)
from .sim_profile import codec_call_ms, render_profile, stage_profile
from .sim_shapes import (
    CfgShare,
    Codec,
    Fit,
    FlowCodec,
    InLoopCodec,
    KvRead,
    LogitsRead,
    PaperCodec,
    PhasedHead,
    Prefill,
    Stack,
    TextPlan,
)

SETTINGS = ("pessimistic", "optimistic")  # what a family without a fitted parameter ships side by side

# Head lines several families print the same way.
DATASHEET_BARE = "{gpu_name}: {sms} SMs, {bandwidth/1e12:.2f} TB/s, {flops/1e12:.0f} TFLOP/s bf16"
DATASHEET = DATASHEET_BARE + " (datasheet)"
DECODE = "decode(b) = floor {floor_ms:.3f} ms + b x row {row_ms:.4f} ms (arithmetic row {arith_row_ms:.4f} ms"
CODEC = ("codec: {codec_c0_ms:.3f} ms/call + {codec_frame_ms*1e3:.2f} us/frame ({codec_flops/1e9:.2f} "
         "GFLOP + {codec_act/1e6:.2f} MB per frame)")
CARRIED = {"pessimistic": "; x {row_inefficiency:.1f} carried from Qwen's H100 fit)", "optimistic": ")"}
HOW_UNFITTED = {
    "pessimistic": "arithmetic row x {row_inefficiency:.1f} (Qwen's H100 fit), codec at half conv "
    "efficiency; nothing fitted",
    "optimistic": "the arithmetic per-row cost, nothing fitted",
}


class _Template(string.Formatter):
    """str.format whose field may scale its value: `{step_params/1e9:.3f}`, `{codec_frame_ms*1e3:.2f}`."""

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[Any, str]:
        m = re.fullmatch(r"(\w+)(?:([*/])([0-9.e]+))?", field_name)
        if m is None:
            raise KeyError(field_name)
        v = kwargs[m[1]]
        if m[2] == "/":
            v = v / float(m[3])
        elif m[2] == "*":
            v = v * float(m[3])
        return v, field_name


def fill(line: str, values: Mapping[str, Any]) -> str:
    return _Template().vformat(line, (), values)


@dataclass(frozen=True)
class CostShape:
    """A family's simulator cost as data (module doc). `head` lines are templates over the terms, the
    quantities (`quantities`), `values` and the `per_setting` texts (templates themselves)."""

    model: str
    label: str  # the profile's calibration name: `<label>-<setting>`
    stacks: tuple[Stack | PhasedHead, ...]
    row_reads: tuple[KvRead | LogitsRead, ...]
    prefill: Prefill
    codec: Codec | InLoopCodec | FlowCodec | PaperCodec
    frames_ref: int
    head: tuple[str, ...]
    values: Mapping[str, Any] = field(default_factory=dict)
    per_setting: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    steps_per_frame: int = 1  # LM steps per frame: the sim's step is a frame (Orpheus: 7 token steps)
    extra_kernels: int = 0  # per step, beyond the stacks'
    cfg: CfgShare | None = None
    row_inefficiency: float = ROW_INEFFICIENCY  # pessimistic: the arithmetic row x this
    conv_eff_pessimistic: float = 0.5  # pessimistic: the codec's convolutions at this share of the prior
    table: Mapping[str, Any] | None = None  # the sizes, when not the registry's (a made-up model in a test)
    settings: tuple[str, ...] = SETTINGS  # the first is the default: its profile is `<gpu>-<model>`
    fit: Fit | None = None
    plan: TextPlan | None = None
    split: tuple[int, int] | None = None  # the interference prior's split (default: the GPU's paper split)

    def sizes(self) -> Mapping[str, Any]:
        return self.table if self.table is not None else sim_sizes(self.model)

    def profile_name(self, gpu_name: str, setting: str) -> str:
        """recipes/gpus/<this>.toml: `<gpu>-<model>` (the default setting) or `<gpu>-<setting>-<model>`."""
        return f"{gpu_name}{'' if setting == self.settings[0] else '-' + setting}-{self.model}"

    def quantities(self, setting: str = "pessimistic") -> dict[str, Any]:
        """What the arithmetic reads of the sizes: params per stack (`params_<key>`, one pass), the step's
        weights, kernels, each row read's bytes (`bytes_<name>`) and their sum, the codec's frame cost."""
        s = self.sizes()
        share = self.plan.share(setting) if self.plan is not None else 0.0
        q: dict[str, Any] = {f"params_{st.key}": st.params(s) for st in self.stacks}
        step = sum(st.n_reads(s) * st.params(s) for st in self.stacks)
        kernels = sum(st.kernels(s) for st in self.stacks) + self.extra_kernels
        row_flops: float = sum(st.row_flops(s, share) for st in self.stacks)
        c = self.codec
        if isinstance(c, InLoopCodec):
            conv, codec_params = c.frame(s[c.key])
            step += codec_params
            kernels += c.kernels(s[c.key])
            q.update(codec_flops=conv, codec_params=codec_params)
        elif isinstance(c, FlowCodec):
            flows = {f"flops_{name}": shape(s, c.history) for name, shape in c.flow}
            q.update(flows, flow_flops=sum(flows.values()),
                     vocoder_flops=c.vocoder_frames * c.vocoder(s[c.vocoder_key]))
        elif isinstance(c, Codec):
            q["codec_flops"], q["codec_act"] = c.frame(s[c.key])
        q.update({f"bytes_{r.name}": r.bytes(s, setting) for r in self.row_reads})
        q.update(step_params=step, step_weight_bytes=step * BYTES_BF16, kernels=kernels, row_flops=row_flops,
                 row_bytes=sum(r.bytes(s, setting) for r in self.row_reads))
        return q

    def _fitted(self, setting: str, fitted: float | None) -> float | None:
        if self.fit is None or setting != self.fit.setting:
            return None
        if fitted is None or (self.fit.replaces == "eff" and not 0 < fitted <= 1):
            bound = " in (0, 1]" if self.fit.replaces == "eff" else ""
            raise ValueError(f"the {setting} setting needs its {self.fit.what}{bound}, got {fitted!r}")
        return float(fitted)

    def terms(self, gpu_name: str, setting: str, fitted: float | None = None) -> dict[str, float]:
        """The terms sim_profile.stage_profile reads (and what the head prints) for `setting`; `fitted`
        is the declared `fit`'s value, which its setting needs."""
        if setting not in self.settings:
            raise ValueError(f"setting must be one of {', '.join(self.settings)}, got {setting!r}")
        value = self._fitted(setting, fitted)
        pess = setting == "pessimistic"
        g = GPUS[gpu_name]
        bw, fl = g.bandwidth * BW_EFF, g.flops * FLOP_EFF
        s, q = self.sizes(), self.quantities(setting)
        conv_eff = self.conv_eff_pessimistic if pess else 1.0
        row_flops = q["row_flops"]
        if isinstance(self.codec, InLoopCodec):
            row_flops = row_flops + q["codec_flops"] / conv_eff
        arith = (q["row_bytes"] / bw + row_flops / fl) * 1e3
        weights = q["step_weight_bytes"] / bw * 1e3
        floor = weights + q["kernels"] * LAUNCH_US / 1e3
        row = arith * (self.row_inefficiency if pess else 1.0)
        if value is not None and self.fit is not None and self.fit.replaces == "row_ms":
            row = value
        first = self.stacks[0].params(s)
        p = self.prefill
        prefill = floor if p.launches else (weights if p.weights == "step" else first * BYTES_BF16 / bw * 1e3)
        if p.encoder is not None:
            enc = p.encoder(s)
            prefill = prefill + enc * BYTES_BF16 / bw * 1e3 + 2 * enc * p.positions / fl * 1e3
        else:
            prefill = prefill + 2 * p.sequences * first * p.positions / fl * 1e3
        token = first if p.token == "first" else q["step_params"]
        t = {"floor_ms": self.steps_per_frame * floor, "row_ms": self.steps_per_frame * row,
             "arith_row_ms": arith, "prefill_ms": prefill, "prefill_token_ms": 2 * token / fl * 1e3}
        if self.steps_per_frame != 1:
            t.update(token_floor_ms=floor, token_row_ms=row)
        t.update(self._codec_terms(s, q, bw, fl, pess, value))
        if self.cfg is not None:
            t.update(self.cfg.terms(s, bw, fl, row, setting))
        return t

    def _codec_terms(self, s: Mapping[str, Any], q: Mapping[str, Any], bw: float, fl: float, pess: bool,
                     value: float | None) -> dict[str, float]:
        c = self.codec
        if isinstance(c, InLoopCodec):
            return {"codec_c0_ms": c.lane_c0_ms, "codec_frame_ms": c.lane_frame_ms}
        if isinstance(c, PaperCodec):
            k = codec_coefficients()
            return {"codec_c0_ms": k["c0"], "codec_frame_ms": k["c1"] / self.frames_ref}
        if isinstance(c, FlowCodec):
            eff, voc_eff = (value if value is not None else 1.0, c.vocoder_eff) if pess else (1.0, 1.0)
            token_ms = (q["flow_flops"] / (fl * eff) + q["vocoder_flops"] / (fl * voc_eff)) * 1e3
            return {"codec_c0_ms": c.kernels(s) * LAUNCH_US / 1e3, "codec_token_ms": token_ms,
                    "codec_frame_ms": token_ms, c.eff: eff}
        conv_eff = self.conv_eff_pessimistic if pess else 1.0
        kernels = c.kernels if isinstance(c.kernels, int) else c.kernels(s[c.key])
        frame = c.overhead * (q["codec_flops"] / (fl * conv_eff) + q["codec_act"] / bw) * 1e3
        return {"codec_c0_ms": kernels * LAUNCH_US / 1e3, "codec_frame_ms": frame}

    def build_profile(self, gpu_name: str, setting: str | None = None, fitted: float | None = None) -> dict:
        setting = setting or self.settings[0]
        t = self.terms(gpu_name, setting, fitted)
        extra = None
        if self.cfg is not None:
            extra = {"cfg_row": round(t["cfg_row"], 4), "cfg_group": round(t["cfg_group"], 4)}
        g = GPUS[gpu_name]
        return stage_profile(self.profile_name(gpu_name, setting), g, self.split or g.paper_split, t,
                             t["codec_frame_ms"], self.frames_ref, extra)

    def profile_toml(self, gpu_name: str, setting: str, fitted: float | None = None) -> str:
        g = GPUS[gpu_name]
        t = self.terms(gpu_name, setting, fitted)
        values: dict[str, Any] = {
            "gpu": gpu_name, "setting": setting, "gpu_name": g.name, "sms": g.sms, "bandwidth": g.bandwidth,
            "flops": g.flops, "launch_us": LAUNCH_US, "row_inefficiency": self.row_inefficiency,
            "model": self.model, **{k: v for k, v in self.sizes().items() if isinstance(v, int)},
            **self.quantities(setting), **self.values, **t,
        }
        if self.plan is not None:
            first = codec_call_ms(t["codec_c0_ms"], t["codec_frame_ms"], self.frames_ref,
                                  self.plan.first_chunk / self.frames_ref, g.sms)
            values.update(plan=self.plan.tokens[setting], ctx=self.plan.ctx()[setting],
                          ttfa_ms=self.plan.ttfa_ms(t, setting, first))
        values.update({k: fill(v[setting], values) for k, v in self.per_setting.items()})
        head = [fill(line, values) for line in self.head]
        return render_profile(head, self.build_profile(gpu_name, setting, fitted), f"{self.label}-{setting}")

    def profiles(self, gpu_name: str, fitted: float | None = None) -> dict[str, str]:
        """Every setting's profile of `gpu_name` as {recipes/gpus/<profile_name>.toml: text}, the `fit`'s
        setting at `fitted` (what a calibration command writes)."""
        fit_setting = self.fit.setting if self.fit is not None else None
        return {f"recipes/gpus/{self.profile_name(gpu_name, s)}.toml":
                self.profile_toml(gpu_name, s, fitted if s == fit_setting else None) for s in self.settings}

    def calibration(self, doc: str) -> Calibration:
        return calibration(doc, (self,))


def calibration(doc: str, costs: Sequence[CostShape]) -> Calibration:
    """`vox calibrate`'s entry of declarations with nothing to fit: every setting of each of `costs` on
    `--gpu` (default h100), written as recipes/gpus/<profile_name>.toml; no simulator run."""

    def add_options(ap: argparse.ArgumentParser) -> None:
        ap.add_argument("--gpu", default="h100", choices=sorted(GPUS), help="the simulated GPU")

    def run(args: argparse.Namespace, sim: Simulator) -> Mapping[str, str]:
        del sim
        gpu = getattr(args, "gpu", None) or "h100"
        return {path: text for c in costs for path, text in c.profiles(gpu).items()}

    return Calibration(doc, add_options, run)
