"""The model program contract: what a SpeechLM must provide so the engine can serve it.

A model program is one object per loaded checkpoint. The engine never looks inside it; it only
calls the stages below, always with a *batch of rows* (rows of different lengths may share a batch):

    prepare(request)       host: text/voice/reference audio -> Prompt (raises InputError)
    prefill(rows)          LM lane: write each row's prompt into its KV pages, sample its first token
    decode(rows)           LM lane: one audio frame per row (depth transformer + sampling inside)
    codec(items)           codec lanes: chunk codes -> PCM, per-request state in a slot table

Ownership: the engine allocates KV pages (`Row.pages`) and codec slots (`Row.slot`, `CodecItem.slot`)
from bounded pools and hands them to the program; the program owns the device tensors behind them
(`init_kv`, `init_codec_slots`). A request's chunks reach `codec` strictly in order; chunks of
different requests may share a batch and arrive on two lanes concurrently (disjoint slots).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from voxcli.config import ChunkSchedule

if TYPE_CHECKING:  # annotations only: `vox models` / `vox voices` import this seam without numpy
    import numpy as np


class ModelError(Exception):
    """Base of the errors a model program raises on purpose (never a bare torch traceback)."""


class InputError(ModelError):
    """The request cannot be served by this model: empty text, unknown voice, bad reference audio..."""


class CheckpointError(ModelError):
    """A checkpoint is missing, incomplete or does not match the architecture (names key and path)."""


@dataclass(frozen=True)
class ModelSpec:
    name: str
    sample_rate: int  # Hz of the PCM the codec emits
    frame_rate: float  # audio frames (backbone steps) per second of audio
    samples_per_frame: int  # PCM samples per frame
    codebooks: int  # codes per frame
    chunk: ChunkSchedule  # default chunk schedule (a recipe may override it)
    max_context: int  # longest prompt + generation the backbone supports
    voices: tuple[str, ...] = ()
    languages: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()  # e.g. ("custom_voice",), ("voice_design",), ("clone_xvec", "clone_icl")
    # False: the model reads a whole text at once (Dia's [S1]/[S2] dialogue spans sentences), so the CLI
    # sends one request per text instead of one per sentence.
    split_sentences: bool = True

    @property
    def frame_seconds(self) -> float:
        return self.samples_per_frame / self.sample_rate


@dataclass(frozen=True)
class SamplingParams:
    """Sampling settings; `None` means the checkpoint's own default (generation_config.json)."""

    greedy: bool = False  # model's own greedy rules (may still apply penalties / masks)
    temperature: float | None = None
    top_k: int | None = None  # >= 0; 0 = no top-k filter
    top_p: float | None = None
    repetition_penalty: float | None = None


@dataclass
class SynthesisRequest:
    """What a user asks for. Model-neutral; a program rejects what it cannot do with InputError."""

    text: str
    voice: str | None = None  # a speaker name (CustomVoice)
    language: str | None = None  # None/"auto" = let the model decide
    instructions: str | None = None  # VoiceDesign / instructable models
    ref_audio: np.ndarray | None = None  # voice clone: mono float32 PCM
    ref_sample_rate: int | None = None
    ref_text: str | None = None  # voice clone ICL mode needs the transcript; absent -> x-vector only
    seed: int | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)
    max_frames: int | None = None
    # Classifier-free guidance scale w (None = the model's default; w > 1 makes the request a
    # conditional + unconditional pair that shares one forward pass; families without CFG refuse w != 1).
    cfg_scale: float | None = None
    # Family-specific options (e.g. Qwen3-TTS sub-talker sampling); a program refuses keys it does not know.
    options: dict[str, Any] = field(default_factory=dict)
    request_id: str | None = None
    # Bench/sim only: force an exact number of frames (random weights cannot run away).
    fixed_frames: int | None = None


@dataclass
class Prompt:
    """Host-side result of `prepare`: everything prefill needs. `length` is the number of prefill
    positions (KV tokens) of one sequence, so the engine can reserve pages before admitting the request."""

    length: int
    data: Any  # model-private (embeddings, trailing text, reference codes...)
    max_frames: int
    fixed_frames: int | None = None
    # Sequences this request runs in every forward pass (a CFG pair = 2). The scheduler admits, batches,
    # cancels and frees them as one unit and counts `width` rows in a bucket; `kv_tokens` covers them all.
    width: int = 1


@dataclass
class Row:
    """One request as the LM stages see it. The engine owns the object; the program reads `pages`,
    `prompt` and writes `state` (model-private per-request decode state: sampler RNG, previous tokens,
    position, pending residual codes...). `kv_len` is maintained by the program."""

    request_id: int
    prompt: Prompt
    pages: list[int]
    slot: int = -1
    kv_len: int = 0
    frames_emitted: int = 0
    state: Any = None


@dataclass
class StepOutput:
    """Per row: the frame produced by this step (codes [codebooks], int64) or None, and whether the
    request is finished (no more frames will come). A finished row's KV pages may be freed."""

    frame: np.ndarray | None
    done: bool


@dataclass
class CodecItem:
    """One chunk for the codec: the request's slot, its frames [n, codebooks] and whether this is the
    request's first chunk (reset the slot's state first) / last chunk (flush any tail)."""

    slot: int
    codes: np.ndarray
    first: bool
    last: bool


def check_codec_batch(items: list[CodecItem], num_slots: int) -> list[int]:
    """The slot rules every streaming codec's batch obeys: the table is allocated, every slot is in it, and
    a batch holds at most one chunk of a slot (its state advances once per pass). Returns the slots."""
    if num_slots < 1:
        raise RuntimeError("codec slots are not allocated: call init_slots(n) first")
    slots = [it.slot for it in items]
    if len(set(slots)) != len(slots):
        raise ValueError(f"a batch must not hold two chunks of the same slot: {slots}")
    for s in slots:
        if not 0 <= s < num_slots:
            raise ValueError(f"codec slot {s} is outside the table of {num_slots} slots")
    return slots


@dataclass(frozen=True)
class ResourceLimits:
    """The engine's own bounds, handed to the program with its device resources (`set_limits`, called
    before `init_kv` / `init_codec_slots` and before any graph stage is built), so fixed-shape buffers
    are sized by what the engine can send rather than by the model's context or its default schedule.

    `max_kv_tokens_per_row`: KV positions one row may reach in a batched (graphed) decode step: the
    longest prompt a prefill batch admits plus the frame cap (plus the step's own position). A row past
    it still decodes, eagerly. `max_chunk_frames`: the largest chunk of the engine's chunk schedule."""

    max_kv_tokens_per_row: int
    max_chunk_frames: int

    def __post_init__(self) -> None:
        if self.max_kv_tokens_per_row < 1 or self.max_chunk_frames < 1:
            raise ValueError(f"resource limits must be positive, got {self}")


@dataclass
class GraphStage:
    """A program's fixed-shape device step for one (stage, bucket, lane), which the cuda executor captures
    as a CUDA graph (see `ModelProgram.graph_stage`).

    `run()` is the device work of one step for `bucket` rows: it reads only tensors the program allocated
    once (static inputs, KV pool, codec slot table; slots are gathered and scattered inside `run` by a
    static index tensor) and returns its outputs as a dict of tensors. `load(rows)` fills the static
    inputs for a batch (host, before replay, on the lane's stream), padding rows up to the bucket.
    `finish(rows, host_outputs)` turns the host copies of the outputs into per-row results (`StepOutput`s
    for decode, PCM arrays for codec) and runs the host token logic."""

    run: Callable[[], dict[str, Any]]
    load: Callable[[list[Any]], None]
    finish: Callable[[list[Any], dict[str, Any]], list[Any]]
    # Optional: False for a batch the fixed shapes cannot hold (a voice-clone first chunk carrying its
    # reference codes, say); such a batch runs eagerly on the same stream instead of failing.
    accepts: Callable[[list[Any]], bool] | None = None
    # Optional: plan an all-padding batch (scratch KV page / scratch codec slot) on the lane's stream.
    # The executor calls it before warm-up and capture, so those runs read planned buffers (FlashInfer's
    # run() needs a prior plan()) and write only scratch memory.
    prime: Callable[[], None] | None = None
    # Optional: called by the executor right after it enqueued a batch's replay, while the device runs
    # it: prepare the host inputs of the NEXT step for the same rows (the usual next decode batch), so
    # that launch only uploads them. A later load() with other rows ignores what was prepared.
    prepare_next: Callable[[list[Any]], None] | None = None


def check_voice_and_language(spec: ModelSpec, request: SynthesisRequest) -> None:
    """A voice among `spec.voices` (none allowed when it has none) and a language among
    `spec.languages` ("auto" always allowed), case-insensitively."""
    name = spec.name
    if request.voice is not None:
        if not spec.voices:
            modes = ", ".join(spec.modes) or "none"
            raise InputError(f"model {name} has no named voices (its modes: {modes}); drop the voice")
        if request.voice.lower() not in {v.lower() for v in spec.voices}:
            raise InputError(f"model {name} has no voice {request.voice!r}; choose one of "
                             f"{', '.join(spec.voices)} (see vox voices -m {name})")
    lang = request.language
    if lang is not None and lang.lower() != "auto" and spec.languages:
        if lang.lower() not in {x.lower() for x in spec.languages}:
            choices = ["auto", *(x for x in spec.languages if x.lower() != "auto")]
            raise InputError(f"model {name} does not speak language {lang!r}; choose one of "
                             f"{', '.join(choices)}")


class ModelProgram(ABC):
    spec: ModelSpec

    @classmethod
    @abstractmethod
    def load(cls, source: str, device: str = "cpu", dtype: str = "float32") -> ModelProgram:
        """Read a Hugging Face layout checkpoint (local dir or hub id). Raise CheckpointError."""

    @abstractmethod
    def prepare(self, request: SynthesisRequest) -> Prompt:
        """Validate (at least what `check` does) and tokenize on the host. Raise InputError with a
        sentence for the user."""

    def check(self, request: SynthesisRequest) -> None:
        """Cheap validation, no tokenizing or audio encoding: what a CLI runs before synthesis for early
        errors. Raise InputError. The default checks voice and language against `spec`, refuses a
        `cfg_scale` other than None/1 and any `options` (override when the family has them)."""
        check_voice_and_language(self.spec, request)
        if request.cfg_scale is not None and request.cfg_scale != 1:
            raise InputError(f"model {self.spec.name} has no classifier-free guidance: leave cfg_scale unset "
                             f"or 1, got {request.cfg_scale}")
        if request.options:
            given = ", ".join(map(repr, request.options))
            raise InputError(f"model {self.spec.name} takes no options, got {given}")

    # --- device resources, sized by the engine -------------------------------------------------
    limits: ResourceLimits | None = None

    def set_limits(self, limits: ResourceLimits) -> None:
        """Take the engine's bounds (see ResourceLimits). Called before init_kv / init_codec_slots."""
        self.limits = limits

    @abstractmethod
    def init_kv(self, num_pages: int, page_size: int) -> None:
        """Allocate the paged KV pool: `num_pages` pages of `page_size` positions each."""

    @abstractmethod
    def init_codec_slots(self, num_slots: int) -> None:
        """Allocate the codec state slot table."""

    def kv_tokens(self, prompt: Prompt) -> int:
        """Positions a request will occupy at most (prompt + generation, every one of its `width`
        sequences) for page reservation. Override when the sequences of a pair differ in length."""
        frames = prompt.max_frames if prompt.fixed_frames is None else prompt.fixed_frames
        return (prompt.length + frames + 1) * prompt.width

    # --- stages ---------------------------------------------------------------------------------
    @abstractmethod
    def prefill(self, rows: list[Row]) -> list[StepOutput]:
        """Run the prompts of `rows` (fresh requests) into their KV pages; sample each first token."""

    @abstractmethod
    def decode(self, rows: list[Row]) -> list[StepOutput]:
        """Advance every row by one frame."""

    @abstractmethod
    def codec(self, items: list[CodecItem]) -> list[np.ndarray]:
        """Decode each item's chunk to float32 mono PCM (gather slots -> decode -> scatter)."""

    def release(self, row: Row) -> None:  # noqa: B027 - optional hook
        """Called once when a request ends (done, cancelled, failed)."""

    # --- optional: graph capture (cuda executor) --------------------------------------------------
    def graph_stage(self, stage: str, bucket: int, lane: str, device: Any = None) -> GraphStage | None:
        """A fixed-shape `GraphStage` for `stage` ("prefill" | "decode" | "codec") at batch size `bucket`
        on `lane` ("lm" | "background" | "urgent"), built on `device` (a torch.device; None = the
        program's own), or None to run that stage eagerly through `prefill/decode/codec`. Called once
        per (partition, stage, bucket) at executor start-up, after `init_kv` / `init_codec_slots` (the
        graphs bind those buffers' addresses). The default offers no graphs."""
        return None
