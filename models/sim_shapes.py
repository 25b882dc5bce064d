"""The stage shapes a family's cost declaration (models/sim_cost.py CostShape) is made of: the stacks a
decode step reads (a grouped-query decoder stack, a phase-split head, a library shape), what a row reads
(K/V caches, a logits row), its prefill, its codec (a FLOP-priced decoder, a codec inside the LM step, a
flow + vocoder, the paper's per-call facts), a text plan before the audio, CFG work sharing, and the one
parameter a setting takes from a fit. Each is data plus the arithmetic of its own shape over the sizes a
family declares (models/<family>/family.py `SimModel.sizes`); integer counts stay integers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .sim_priors import BYTES_BF16, KERNELS_PER_LAYER, KERNELS_PER_MODEL, LAUNCH_US
from .sim_stages import Sizes, gqa_layer_params, kv_bytes

Count = str | int  # a key of the stage's sizes or a literal count


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
