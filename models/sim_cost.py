"""One parametric cost model: a family's simulator cost is the sizes and stage shapes it declares.

A family's `sim.py` holds one `COST = CostShape(...)`: the LM stacks a decode step reads (a decoder stack
of its sizes, or a library shape such as a diffusion head, each with its head rows and how often a step
reads it), the bytes a row reads (K/V caches, a logits row), its prompt, its codec as a named shape of
models/sim_stages.py or models/sim_codecs.py, the chunk reference and the TOML head as template lines with
named placeholders. This module computes, from the declaration and the sizes of models/<family>/family.py,
the terms, the profile dict and the TOML text of every GPU x setting; the family's module keeps its
docstring of assumptions, which is its documentation. The priors are models/sim_priors.py's.

The arithmetic keeps the order of operations of the per-family copies it replaces (integer counts stay
integers until they are divided), so every shipped profile is byte-identical
(benchmarks/profile_hashes.py).
"""

from __future__ import annotations

import argparse
import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .registry import sim_sizes
from .sim_calibration import Calibration, Simulator
from .sim_priors import (
    BW_EFF,
    BYTES_BF16,
    FLOP_EFF,
    GPUS,
    KERNELS_PER_LAYER,
    KERNELS_PER_MODEL,
    LAUNCH_US,
    ROW_INEFFICIENCY,
    codec_coefficients,
)
from .sim_profile import codec_call_ms, render_profile, stage_profile
from .sim_stages import Sizes, gqa_layer_params, kv_bytes

Count = str | int  # a key of the stage's sizes or a literal count
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


def _count(s: Sizes, n: Count) -> int:
    return s[n] if isinstance(n, str) else n


@dataclass(frozen=True)
class Stack:
    """A stack a decode step reads: `sizes[key]` as a grouped-query decoder stack (+ cross-attention q/o
    per layer when `cross`), a head of the product of `head` rows and an input projection from
    `sizes[key][in_proj]` wide; or a library `shape` (params of its sizes). Its weights are read `reads`
    times a step, its kernels launched `launches` times, and a row runs its FLOPs `row_passes` times
    (both default to `reads`)."""

    key: str
    head: tuple[Count, ...] = ()
    reads: Count = 1
    in_proj: str | None = None
    cross: bool = False
    layer_kernels: int = 0  # per layer beyond KERNELS_PER_LAYER (e.g. a cross-attention's 3)
    sampling: int = 0  # sampling kernels per pass
    launches: int | None = None
    row_passes: int | None = None
    shape: Callable[[Sizes], int] | None = None
    pass_kernels: int | None = None  # kernels per pass of a library shape

    def params(self, sizes: Sizes) -> int:
        s = sizes[self.key]
        if self.shape is not None:
            return self.shape(s)
        layer = gqa_layer_params(s)
        if self.cross:
            layer += 2 * s["hidden"] * s["cross_heads"] * s["cross_head_dim"]  # q and o; k/v at prefill
        rows = 1
        for n in self.head:
            rows *= _count(s, n)
        p = s["layers"] * layer + s["hidden"] * (rows if self.head else 0)
        return p + (s[self.in_proj] * s["hidden"] if self.in_proj else 0)

    def n_reads(self, sizes: Sizes) -> int:
        return _count(sizes[self.key], self.reads)

    def kernels(self, sizes: Sizes) -> int:
        s = sizes[self.key]
        each = self.pass_kernels if self.pass_kernels is not None else (
            s["layers"] * (KERNELS_PER_LAYER + self.layer_kernels) + KERNELS_PER_MODEL + self.sampling)
        return (self.launches if self.launches is not None else self.n_reads(sizes)) * each

    def row_flops(self, sizes: Sizes, text_share: float) -> int:
        n = self.row_passes if self.row_passes is not None else self.n_reads(sizes)
        return n * 2 * self.params(sizes)


@dataclass(frozen=True)
class PhasedHead:
    """A head computing only each phase's candidates (a unified text + audio LM, models/speechlm/head.py):
    in a text step the text vocabulary + `text_extra` rows, in an audio step `audio_rows` per stream of
    `sizes["streams"]`, all over `sizes[stack]["hidden"]`. A step reads both row sets (a batch mixes
    phases); a row's FLOPs are its text share of steps times the text rows plus the rest times the audio's."""

    stack: str
    text_extra: int = 2
    audio_rows: int = 1027
    key: str = "head"  # its params' name (`params_head`)

    def rows(self, sizes: Sizes) -> tuple[int, int]:
        return sizes["text_vocab"] + self.text_extra, sizes["streams"] * self.audio_rows

    def params(self, sizes: Sizes) -> int:
        return sizes[self.stack]["hidden"] * sum(self.rows(sizes))

    def n_reads(self, sizes: Sizes) -> int:
        return 1

    def kernels(self, sizes: Sizes) -> int:
        return 0  # the stack's model kernels launch it

    def row_flops(self, sizes: Sizes, text_share: float) -> float:
        text, audio = self.rows(sizes)
        return 2 * (sizes[self.stack]["hidden"] * (text_share * text + (1 - text_share) * audio))


@dataclass(frozen=True)
class TextPlan:
    """Text a request decodes before its audio (`tokens` per setting, one row: no guidance), after a
    `prompt`, then `audio_frames` as a CFG pair whose first `delay_fill` + `first_chunk` steps (after a
    modality pass) precede the first codec call. A row's context and text share of steps follow."""

    tokens: Mapping[str, int]
    prompt: int
    audio_frames: int
    delay_fill: int
    first_chunk: int

    def ctx(self) -> dict[str, int]:
        return {k: self.prompt + v + self.audio_frames // 2 for k, v in self.tokens.items()}

    def share(self, setting: str) -> float:
        return self.tokens[setting] / (self.tokens[setting] + self.audio_frames)

    def ttfa_ms(self, t: Mapping[str, float], setting: str, codec_ms: float) -> float:
        """Submit -> first audio on an empty server: prefill, the plan (1 row), the modality pass + delay
        fill + first chunk (2 rows), one codec call of `codec_ms`."""
        def step(rows: int) -> float:
            return t["floor_ms"] + rows * t["row_ms"]

        prefill = t["prefill_ms"] + self.prompt * t["prefill_token_ms"]
        return prefill + self.tokens[setting] * step(1) + (1 + self.delay_fill + self.first_chunk) * step(2) \
            + codec_ms


@dataclass(frozen=True)
class KvRead:
    """K and V (bf16) a row reads every step from `sizes[stack]`'s layers over `positions` positions, at
    a width of `sizes[width[0]] x sizes[width[1]]`; with `lead` set, a cache per pass instead (a depth
    decoder: `passes` caches of on average (passes + lead) / 2 positions)."""

    name: str
    stack: str
    positions: int | Mapping[str, int] = 0  # or per setting
    width: tuple[str, str] = ("kv_heads", "head_dim")
    lead: int | None = None

    def bytes(self, sizes: Sizes, setting: str) -> float:
        s = sizes[self.stack]
        if self.lead is not None:
            return s["passes"] * kv_bytes(s, s["passes"] + self.lead) / 2
        n = self.positions if isinstance(self.positions, int) else self.positions[setting]
        return s["layers"] * 2 * s[self.width[0]] * s[self.width[1]] * BYTES_BF16 * n


@dataclass(frozen=True)
class LogitsRead:
    """A row's fp32 logits over `sizes[stack]["vocab"]`, written and read back every step."""

    name: str
    stack: str

    def bytes(self, sizes: Sizes, setting: str) -> float:
        return sizes[self.stack]["vocab"] * 4


@dataclass(frozen=True)
class Prefill:
    """A request's prefill: one step (or, with `launches` False, the `weights` alone: "step" or "first"
    stack's) plus 2 FLOP per parameter of the first stack per prompt position of each of `sequences`; or
    with `encoder` (a library shape of the sizes), that pass's weights read once and its FLOPs over the
    `positions` instead. The per-position cost (`prefill_token_ms`) is 2 FLOP per parameter of `token`."""

    positions: int
    sequences: int = 1
    launches: bool = True
    weights: str = "step"
    encoder: Callable[[Sizes], int] | None = None
    token: str = "first"  # the per-position cost's params: the "first" stack's or the whole "step"'s


@dataclass(frozen=True)
class Codec:
    """The codec lane: `sizes[key]` decoded by a library `frame` shape ((FLOPs, activation bytes) per
    frame), `kernels` per call (a count or a shape of the sizes), `overhead` frames decoded per frame
    delivered (re-decoded context)."""

    key: str
    frame: Callable[[Sizes], tuple[float, float]]
    kernels: int | Callable[[Sizes], int]
    overhead: float = 1.0


@dataclass(frozen=True)
class InLoopCodec:
    """A codec run inside the LM step (`frame`: (FLOPs, params) per frame of `sizes[key]`): its weights
    and `kernels` join the step, its FLOPs the row (at the setting's conv efficiency); the codec lane only
    unpacks PCM at `lane_c0_ms` + `lane_frame_ms` per frame."""

    key: str
    frame: Callable[[Sizes], tuple[float, int]]
    kernels: Callable[[Sizes], int]
    lane_c0_ms: float
    lane_frame_ms: float


@dataclass(frozen=True)
class FlowCodec:
    """A token-to-mel flow then a vocoder, priced per speech token (CosyVoice): the `flow` shapes' FLOPs
    (each `(name, shape(sizes, history))`) at the flow's efficiency `eff` (the fitted or carried parameter
    in the pessimistic setting, 1 otherwise), plus `vocoder_frames` x the vocoder's FLOPs per mel frame
    (`vocoder` of `sizes[vocoder_key]`) at `vocoder_eff` when pessimistic; `kernels(sizes)` per call."""

    flow: tuple[tuple[str, Callable[[Sizes, int], float]], ...]
    history: int
    vocoder_key: str
    vocoder: Callable[[Sizes], float]
    kernels: Callable[[Sizes], int]
    eff: str  # the efficiency's name in the terms and the head
    vocoder_frames: int = 2
    vocoder_eff: float = 0.25


@dataclass(frozen=True)
class PaperCodec:
    """A codec priced by the paper's per-call facts (sim_priors.codec_ms: a launch floor c0 and c1 per
    chunk of `frames_ref` frames) instead of FLOP arithmetic (Qwen3-TTS's tokenizer, models/sim_paper.py)."""


@dataclass(frozen=True)
class Fit:
    """The one parameter a `setting` takes from outside the arithmetic (a fit, or a value carried from
    another profile): the per-row cost itself (`replaces` "row_ms") or a FlowCodec's efficiency
    ("eff"); `what` names it in the error when it is missing."""

    setting: str
    replaces: str
    what: str


@dataclass(frozen=True)
class CfgShare:
    """A CFG pair's unconditional sequence sharing work with its partner (Dia, models/dia/shared_cross.py):
    its cross-attention (the `cross` read and the q/o FLOPs) is one constant, and layer 0's self-attention
    (over `ctx` positions) is the partner's. cfg_row = what it still costs in rows; cfg_group = once per
    batch, the kernels the sharing adds (one per layer + one) in the pessimistic setting only."""

    stack: str
    cross: KvRead
    ctx: int

    def terms(self, sizes: Sizes, bw: float, fl: float, row_ms: float, setting: str) -> dict[str, float]:
        d = sizes[self.stack]
        h, hd = d["hidden"], d["head_dim"]
        qo = 2 * d["layers"] * 2 * h * d["cross_heads"] * d["cross_head_dim"]
        cross = (self.cross.bytes(sizes, setting) / bw + qo / fl) * 1e3
        layer0 = (2 * (2 * h * d["heads"] * hd + 2 * h * d["kv_heads"] * hd) / fl
                  + 2 * d["kv_heads"] * hd * BYTES_BF16 * self.ctx / bw) * 1e3
        kernels = d["layers"] + 1 if setting == "pessimistic" else 0
        return {"cfg_row": 1.0 - (cross + layer0) / row_ms, "cfg_group": kernels * LAUNCH_US / 1e3 / row_ms,
                "cfg_cross_ms": cross, "cfg_layer0_ms": layer0}


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
        return {f"recipes/gpus/{c.profile_name(gpu, s)}.toml": c.profile_toml(gpu, s)
                for c in costs for s in c.settings}

    return Calibration(doc, add_options, run)
