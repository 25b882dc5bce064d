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

Re-runnability (what fault isolation relies on; voxcli/engine/isolation.py): when a stage raises for a
batch, the engine calls the same stage again with parts of that batch (halves, down to single rows) to
find the rows whose own data caused it, and fails only those. So a stage call that RAISES must leave
every row as it was before the call:

* host state: `Row.state` (sampler RNG position, delay-pattern / host token state, previous tokens),
  `Row.kv_len`, `Row.frames_emitted` and any per-slot table the program keeps (reference codes...);
  compute everything first, then commit every row in a loop that cannot raise. Random draws are
  peeked and consumed in the commit (both families draw uniforms in blocks from the request's own
  generator: `peek_uniforms`). prefill may rebuild a row's state from its prompt instead (a re-run
  builds it again).
* device state: KV writes go only to the row's own pages at positions >= its `kv_len` (a re-run writes
  them again with the same values); a codec gathers its slots' state, decodes, and scatters it back
  only after the whole batch decoded (a raise leaves the slot table untouched).
A row's result may also be an exception object (that row alone fails). Errors that are the device's
(out of memory, CUDA errors) are not re-run: they fail the batch. The cuda executor's graph stages
(`graph_stage`) are not re-run: a raise there fails the batch, as a device fault does.

Numeric bounds (`check` enforces them before batching, one sentence naming the field and the range):
every field the stages compute with is bounded by what they can take (`NUMERIC_BOUNDS` below, shared
by every family: `check_numbers`, `check_number` for a family's options), so a request's numbers never
make a batch raise in the first place.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from .bounds import INT32_MAX, NUMERIC_BOUNDS, SEED_MAX, NumberRange  # noqa: F401 - re-exported
from .errors import CheckpointError, InputError, ModelError  # noqa: F401 - re-exported
from .options import NO_OPTIONS, OptionSchema, validate_options
from .voices import ResolvedVoice, VoiceCatalog, resolve_voice

if TYPE_CHECKING:  # annotations only: `vox models` / `vox voices` import this seam without numpy
    import numpy as np



@dataclass(frozen=True)
class ChunkSchedule:
    """How a request's frames are cut into codec chunks: `first` frames, then each `ramp` size in
    turn, then `steady` frames per chunk until the end (the last chunk may be shorter)."""

    first: int = 4
    ramp: tuple[int, ...] = ()
    steady: int = 10

    def size(self, index: int) -> int:
        if index == 0:
            return self.first
        if index - 1 < len(self.ramp):
            return self.ramp[index - 1]
        return self.steady

    def validate(self) -> None:
        if not isinstance(self.ramp, tuple):
            raise ValueError(f"chunk.ramp must be a list of frame counts such as [6, 8], got {self.ramp!r}")
        for name, n in (("first", self.first), *(("ramp", r) for r in self.ramp), ("steady", self.steady)):
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise ValueError(f"chunk.{name} must be a whole number of frames >= 1, got {n!r}")


# The mode of a family that reads text as it arrives: its `prepare` takes `feed=` (a TextFeed), the engine
# submits one request for a text still arriving, and its first word's arrival starts the request.
TEXT_STREAM = "text_stream"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    sample_rate: int  # Hz of the PCM the codec emits
    frame_rate: float  # audio frames (backbone steps) per second of audio
    samples_per_frame: int  # PCM samples per frame
    codebooks: int  # codes per frame
    chunk: ChunkSchedule  # default chunk schedule (a recipe may override it)
    max_context: int  # longest prompt + generation the backbone supports
    voices: tuple[str, ...] = ()  # every name `voice_catalog` resolves (what `vox voices` lists)
    languages: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()  # e.g. ("custom_voice",), ("voice_design",), ("clone_xvec", "clone_icl")
    # False: the model reads a whole text at once (Dia's [S1]/[S2] dialogue spans sentences), so the CLI
    # sends one request per text instead of one per sentence.
    split_sentences: bool = True
    # Frames of audio a streaming codec holds back past a chunk's end (a non-causal decoder's right
    # context, referred to the frame rate; 0 for a causal one): chunk 0 of n frames plays n - h frames,
    # a middle chunk its own frames, the last chunk its frames + h. The engine's playback deadlines and
    # its per-chunk audio accounting read it; a causal codec leaves it 0.
    codec_lookahead_frames: float = 0.0
    # Where the voices come from (models/voices.py): a family with voice files sets it; None means the
    # names in `voices` are the checkpoint's speakers.
    voice_catalog: VoiceCatalog | None = None

    @property
    def catalog(self) -> VoiceCatalog:
        return self.voice_catalog if self.voice_catalog is not None else VoiceCatalog(speakers=self.voices)

    def resolve_voice(self, voice: str, allow_paths: bool) -> ResolvedVoice:
        """The one way a family turns a request's voice into a speaker or a file (models/voices.py)."""
        return resolve_voice(voice, self.catalog, allow_paths=allow_paths, model=self.name)

    @property
    def clones(self) -> bool:
        """Whether a reference clip (--ref-audio) can give the voice: every family names its cloning
        modes "clone…" (clone, clone_context, clone_xvec, clone_icl)."""
        return any(m.startswith("clone") for m in self.modes)

    @property
    def streams_text(self) -> bool:
        """Whether a request's text may still be arriving while it runs (`prepare(request, feed=...)`,
        models/text_feed.py): the family declares the mode TEXT_STREAM (Kyutai's delayed streams)."""
        return TEXT_STREAM in self.modes

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
    voice: str | None = None  # a name from the model's voices (models/voices.py), or a file path if below
    # The voice may be a file path on this machine: only a local front end (the CLI, the Python API) sets
    # it; a request from the network (HTTP, WebSocket, Ray) names a voice and never a file.
    voice_paths: bool = False
    language: str | None = None  # None/"auto" = let the model decide
    instructions: str | None = None  # VoiceDesign / instructable models
    ref_audio: np.ndarray | None = None  # voice clone: mono float32 PCM
    ref_sample_rate: int | None = None
    ref_text: str | None = None  # voice clone ICL mode needs the transcript; absent -> x-vector only
    # Audio in (a unified LM hears: transcription, a spoken dialogue turn): the user's clip, PCM [n] or
    # [channels, n], and its rate; `text` is then empty. Families that cannot hear refuse it.
    input_audio: np.ndarray | None = None
    input_sample_rate: int | None = None
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
    # Decode steps expected before the first frame (a delay pattern's fill, a unified LM's text phase):
    # the admission gate adds them to its TTFA prediction.
    lead_steps: int = 0
    # Decode steps per frame (Orpheus: 7, one token a step, the frame on the seventh): the admission gate
    # charges a first chunk of n frames n * steps_per_frame steps.
    steps_per_frame: int = 1
    # CFG pairs whose unconditional sequences share work carry one equal key (Dia: one key for every pair,
    # as its unconditional cross-attention is one constant whatever the text): the program shares that
    # work between them and a cost model may charge it once per key and batch. None = nothing shared.
    uncond_key: object = None
    # Codec state this request's slot accumulates (CosyVoice 3's DiT keys/values): a fixed part (a voice
    # prompt's frames) plus a part per frame it decodes; the engine reserves base + per_frame x its frame
    # cap against the memory plan's codec state budget at admission (voxcli/engine/codec_slots.py).
    codec_state_base_bytes: int = 0
    codec_state_bytes_per_frame: int = 0


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
    text_tokens: int = 0  # text tokens this step wrote (a unified LM's text segment): TTFT, tokens/s


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


@dataclass(frozen=True)
class MemoryNeeds:
    """What a loaded program will still need in device memory, per unit, so the engine can size its KV
    pool and codec slots from the free memory without allocating to find out (voxcli/engine/memory_plan).
    Every figure is bytes in the program's own dtypes; each program says how it derived its estimates."""

    kv_bytes_per_position: int  # K and V of every layer for one pooled position
    codec_slot_bytes: int  # one codec slot's streaming state
    # eager attention copies the K/V of the positions in a batch one layer at a time (plus any grouped-
    # query expansion): its peak grows with the positions in use, so it is charged per pooled position
    gather_bytes_per_position: int = 0
    prefill_bytes_per_token: int = 0  # activations of one prefill position
    prefill_bytes_per_token_pair: int = 0  # attention scores: quadratic in one row's prefill length
    decode_bytes_per_row: int = 0  # activations of one decode row (backbone step + depth transformer)
    codec_bytes_per_frame: int = 0  # activations of one frame in a codec batch
    pending_weight_bytes: int = 0  # weights still to be loaded (a codec read on first use)
    extra_positions_per_row: int = 0  # KV positions a row holds beyond prompt + frames (delay tail...)
    rows_per_request: int = 1  # sequences of one default request (a CFG pair: 2)
    # per-request codec state that grows with the request (see Prompt.codec_state_bytes_per_frame): bytes
    # per frame, and the frames a default request holds before its first (its voice prompt's), so the plan
    # can size the budget for one request at the frame cap
    codec_state_bytes_per_frame: int = 0
    codec_state_prefix_frames: int = 0


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
    # Optional (decode): plan every row of the bucket `context` KV positions deep, on consecutive pages,
    # with no requests behind them: a calibration times a captured step at a context length this way.
    plan_context: Callable[[int], None] | None = None


def check_number(name: str, value: Any, kind: str | None = None) -> None:
    """`value` against NUMERIC_BOUNDS[kind or name]; the message names `name` (e.g. "sub_top_k")."""
    NUMERIC_BOUNDS[kind or name].check(name, value)


def check_numbers(request: SynthesisRequest) -> None:
    """Every model-neutral numeric field of `request` (sampling, seed, frames, cfg_scale, reference rate)
    in its NUMERIC_BOUNDS range; every family's `check` and `prepare` run this before anything else."""
    s = request.sampling
    for name in ("temperature", "top_k", "top_p", "repetition_penalty"):
        check_number(name, getattr(s, name, None))
    for name in ("seed", "max_frames", "fixed_frames", "cfg_scale", "ref_sample_rate"):
        check_number(name, getattr(request, name))


def check_voice_and_language(spec: ModelSpec, request: SynthesisRequest) -> None:
    """A voice the spec's catalog resolves (none allowed when it has none) and a language among
    `spec.languages` ("auto" always allowed), case-insensitively."""
    name = spec.name
    if request.voice is not None:
        if not spec.catalog.kinds:
            modes = ", ".join(spec.modes) or "none"
            raise InputError(f"model {name} has no named voices (its modes: {modes}); drop the voice")
        spec.resolve_voice(request.voice, request.voice_paths)
    lang = request.language
    if lang is not None and lang.lower() != "auto" and spec.languages:
        if lang.lower() not in {x.lower() for x in spec.languages}:
            choices = ["auto", *(x for x in spec.languages if x.lower() != "auto")]
            raise InputError(f"model {name} does not speak language {lang!r}; choose one of "
                             f"{', '.join(choices)}")


@dataclass(frozen=True)
class TextWritten:
    """A text segment a model wrote (a unified text+audio model's text phase, or what it heard): the
    request it belongs to (`SynthesisRequest.request_id`), the text, and its text-vocabulary token ids."""

    request_id: str | None
    text: str
    token_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class TextGrew:
    """The text a model is writing grew by `delta` after a text token (`vox transcribe`, the server's
    transcript.text.delta). A segment's deltas add up to its text when the detokenizer never rewrites a
    prefix (it can: the segment's TextWritten is what counts)."""

    request_id: str | None
    delta: str


TextEvent = TypeVar("TextEvent", TextWritten, TextGrew)
TextListener = Callable[[TextWritten], None]


class TextEvents(Generic[TextEvent]):
    """The text a program writes, handed to every listener on the engine thread: each segment as it ends
    (`TextWritten`), or each growth of it (`TextGrew`).

    Emitted before the step's audio is decoded, so a listener holding a request's first audio chunk has
    already seen the text written before it. Listeners are kept in an immutable tuple (swapped whole):
    emitting reads it without a lock while another thread subscribes."""

    def __init__(self) -> None:
        self._listeners: tuple[Callable[[TextEvent], None], ...] = ()

    def listen(self, listener: Callable[[TextEvent], None]) -> Callable[[], None]:
        """Call `listener` for every event from now on; returns the call that stops it."""
        self._listeners = (*self._listeners, listener)

        def stop() -> None:
            self._listeners = tuple(x for x in self._listeners if x is not listener)
        return stop

    def emit(self, event: TextEvent) -> None:
        for listener in self._listeners:
            listener(event)


class ModelProgram(ABC):
    spec: ModelSpec

    # The text this model writes (`TextEvents`); None for a model that only speaks. A front end shows it
    # (`--show-text`) or transcribes with it by listening here, never by patching the program.
    text_written: TextEvents[TextWritten] | None = None
    # The same text as it grows token by token (`TextGrew`); None where the model writes none.
    text_grew: TextEvents[TextGrew] | None = None

    @classmethod
    @abstractmethod
    def load(cls, source: str, device: str = "cpu", dtype: str = "float32") -> ModelProgram:
        """Read a Hugging Face layout checkpoint (local dir or hub id). Raise CheckpointError."""

    @abstractmethod
    def prepare(self, request: SynthesisRequest) -> Prompt:
        """Validate (at least what `check` does) and tokenize on the host. Raise InputError with a
        sentence for the user. A program whose spec `streams_text` also takes `feed=` (a TextFeed: the
        text still arriving, read at every step; a stale one fails that row alone)."""

    def check(self, request: SynthesisRequest) -> None:
        """Cheap validation, no tokenizing or audio encoding: what a CLI runs before synthesis for early
        errors. Raise InputError. The default checks voice and language against `spec`, refuses a
        `cfg_scale` other than None/1 and any option its `option_schema` does not take, and bounds
        every numeric field (`check_numbers`; an override must call it too)."""
        check_numbers(request)
        check_voice_and_language(self.spec, request)
        if request.cfg_scale is not None and request.cfg_scale != 1:
            raise InputError(f"model {self.spec.name} has no classifier-free guidance: leave cfg_scale unset "
                             f"or 1, got {request.cfg_scale}")
        self.options_of(request)

    # The family's options (models/options.py): a family with options sets its schema here, the same
    # object its `Family` registration lists. The default: no options.
    option_schema: OptionSchema = NO_OPTIONS

    def options_of(self, request: SynthesisRequest) -> dict[str, Any]:
        """The request's options, checked against `option_schema` by the one validator, every absent one
        at its default: the only way a family reads its options (none parses them itself)."""
        return validate_options(self.option_schema, request.options, f"model {self.spec.name}")

    # --- device resources, sized by the engine -------------------------------------------------
    limits: ResourceLimits | None = None

    def set_limits(self, limits: ResourceLimits) -> None:
        """Take the engine's bounds (see ResourceLimits). Called before init_kv / init_codec_slots."""
        self.limits = limits

    def memory_needs(self) -> MemoryNeeds | None:
        """Per-unit device memory costs for the engine's memory plan, or None (a program without device
        memory, such as the sim's: the engine then takes kv_pages and codec_slots as given)."""
        return None

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

    # --- per-request codec slot state (a voice clone's reference, a voice, a codec mode) ------------
    def codec_binding(self, prompt: Prompt) -> Any:
        """What the codec slot of this request must hold besides its codes, as plain picklable data (numpy
        arrays, numbers, strings; no device tensors), or None when the codec needs nothing. A split
        placement sends it from the LM engine to the codec engine with the request's first chunk. Raise
        InputError with a sentence for the user when this request's codec state cannot leave the process
        (the split path then refuses the request rather than decode it without that state)."""
        return None

    def bind_codec_slot(self, slot: int, binding: Any) -> None:
        """Give codec slot `slot` a request's `codec_binding` (None: nothing), replacing what it held. The
        one code path: a program's `prefill` calls it for a row holding a slot (the both engine), a
        codec-only engine calls it when the request gets its slot; `release` drops it."""
        if binding is not None:
            raise NotImplementedError(f"{type(self).__name__} binds no codec slot state but was given some")

    # --- optional: graph capture (cuda executor) --------------------------------------------------
    def graph_stage(self, stage: str, bucket: int, lane: str, device: Any = None) -> GraphStage | None:
        """A fixed-shape `GraphStage` for `stage` ("prefill" | "decode" | "codec") at batch size `bucket`
        on `lane` ("lm" | "background" | "urgent"), built on `device` (a torch.device; None = the
        program's own), or None to run that stage eagerly through `prefill/decode/codec`. Called once
        per (partition, stage, bucket) at executor start-up, after `init_kv` / `init_codec_slots` (the
        graphs bind those buffers' addresses). The default offers no graphs."""
        return None
