"""SyntheticProgram: a ModelProgram with no tensors, for the sim and for engine tests.

Audio shape (sample rate, frame rate, samples per frame, codebooks): a registered family's sim spec
(models/registry.py; `for_model(name)` picks the family of a sim model name, hub id or demo alias; the
default family's otherwise), each overridable by argument.

Classifier-free guidance: a request with `cfg_scale` > 1 (or, without one, a family whose sim spec has a
default guidance > 1) prepares a width-2 prompt (a conditional + unconditional pair in every forward
pass), so engine tests can check how pairs are scheduled. A family with a delay pattern (`lead_steps`)
takes that many decode steps before a request's first frame.

Frames: `SynthesisRequest.fixed_frames` when given, else an estimate from the text length (about 15
characters per second of speech). Frame k of a request is the code vector filled with k, and the codec
turns each frame into `samples_per_frame` samples of the value `code[0] * pcm_scale` (0 by default:
silence of the right length), so a test can read back which frames reached the audio and in what order.

Text that arrives while the request runs (`streams_text=True`: the spec's TEXT_STREAM mode, as Kyutai's;
`prepare(request, feed=...)`): each word owes its frames at the same speaking rate once it has arrived;
a row that has spoken every word it has while the text is still open emits a pad frame per step (Kyutai's
state machine pads while it waits for a word: the row never stalls a batch); it ends when the text is
closed and spoken, and fails alone (an InputError in place of its step) once its feed is stale.

Failure injection for tests, written into the text: `[fail:prefill]` (the prefill batch holding the
request raises), `[fail:decode@K]` (the decode step that would produce frame K reports an error for that
row only), `[fail:codec@C]` (chunk C reports an error for that item only), `[fail:input]` (prepare raises
InputError). Per-row errors use the engine's convention: an exception object in place of a row's result
fails that request alone; a raised exception fails the whole batch. The codec also checks the contract it
is given: a slot's chunks must arrive in order, starting with `first`, continuing frame after frame."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from voxcli.config import ChunkSchedule
from voxcli.models import registry
from voxcli.models.base import (
    TEXT_STREAM,
    CodecItem,
    InputError,
    ModelProgram,
    ModelSpec,
    Prompt,
    Row,
    StepOutput,
    SynthesisRequest,
    check_numbers,
)
from voxcli.models.options import NO_OPTIONS, OptionSchema
from voxcli.models.text_feed import TextFeed

_FAIL = re.compile(r"\[fail:(prefill|input|decode@(\d+)|codec@(\d+))\]")


# Audio in (assumptions, stated): LibriSpeech reads at ~2.7 words/s and a BPE text vocabulary spends ~1.3
# tokens per English word, so ~3.5 answer tokens per second of audio. The X-Codec encode (HuBERT-base,
# ~95 M parameters at 50 frames/s, plus a DAC encoder at 16 kHz, ~20 GFLOP per audio second in all) costs
# ~2.5% of an 8B LM's prefill of the same 50 frames/s (800 GFLOP): charged as 3% extra prefill tokens here;
# ENCODE_TOKEN_SHARE = 0.10 is the pessimistic setting (convolutions far below matmul utilization).
ANSWER_TOKENS_PER_S = 3.5
ENCODE_TOKEN_SHARE = 0.03


class InjectedFailure(RuntimeError):
    """A failure a test asked for."""


@dataclass
class _Plan:
    frames: int
    text_tokens: int = 0  # audio in (a text answer, no frames): tokens to write, one per decode step
    fail_prefill: bool = False
    fail_decode_at: int | None = None
    fail_codec_at: int | None = None
    feed: TextFeed | None = None  # the text still arriving (streams_text)


@dataclass
class _RowState:
    emitted: int = 0
    lead: int = 0  # lead steps taken (see SimSpec.lead_steps)
    fed_words: int = 0  # a fed text's words read so far, and the frames they owe
    owed: int = 0


class SyntheticProgram(ModelProgram):
    option_schema: OptionSchema = NO_OPTIONS  # set per instance: its family's

    def __init__(self, sample_rate: float | None = None, frame_rate: float | None = None,
                 samples_per_frame: int | None = None, codebooks: int | None = None,
                 chunk: ChunkSchedule | None = None, max_context: int = 4096, chars_per_second: float = 15.0,
                 pcm_scale: float = 0.0, sim: registry.SimSpec | None = None,
                 streams_text: bool | None = None) -> None:
        """`sim` (default: the default family's) supplies every audio setting not given. `chunk` is the
        program's own (model default) schedule: ChunkSchedule() unless given (`for_model` gives the
        family's sim schedule)."""
        sim = sim or registry.default_family().sim
        streams_text = sim.streams_text if streams_text is None else streams_text
        self.spec = ModelSpec(name="synthetic", sample_rate=sample_rate or sim.sample_rate,
                              frame_rate=frame_rate or sim.frame_rate,
                              samples_per_frame=samples_per_frame or sim.samples_per_frame,
                              codebooks=codebooks or sim.codebooks,
                              chunk=chunk or ChunkSchedule(), max_context=max_context,
                              voices=("any",),
                              modes=("custom_voice", *((TEXT_STREAM,) if streams_text else ())),
                              codec_lookahead_frames=sim.codec_lookahead_frames)
        self.chars_per_second = chars_per_second
        self.pcm_scale = pcm_scale
        self.default_cfg = sim.cfg_scale  # a request without cfg_scale gets the family's default guidance
        self.lead_steps = sim.lead_steps  # decode steps that emit no frame yet (delay-pattern fill)
        self._frames: list[np.ndarray] = []  # frame k is shared by every request (no allocation)
        self._slot_next: dict[int, int] = {}  # slot -> next expected frame index
        self._slot_chunk: dict[int, int] = {}
        self._slot_plan: dict[int, _Plan] = {}  # slot -> the plan of the request holding it
        self.kv_pages = 0
        self.slots = 0
        self.option_schema = registry.default_family().options  # as for_model's

    @classmethod
    def for_model(cls, model: str | None, **kw) -> SyntheticProgram:  # type: ignore[no-untyped-def]
        """The sim's stand-in for `model`: its family's audio shape and sim chunk schedule."""
        sim = registry.sim_spec_for(model)
        kw.setdefault("chunk", sim.chunk)
        program = cls(sim=sim, **kw)
        family = registry.find_family(model) if model else None
        # the family's options, so the sim refuses what the real model would (models/options.py)
        program.option_schema = (family or registry.default_family()).options
        return program

    @classmethod
    def load(cls, source: str, device: str = "cpu", dtype: str = "float32") -> SyntheticProgram:
        return cls.for_model(source)

    def prepare(self, request: SynthesisRequest, feed: TextFeed | None = None) -> Prompt:
        check_numbers(request)  # the ranges every family applies (models/base.py NUMERIC_BOUNDS)
        if feed is not None:
            if not self.spec.streams_text:
                raise InputError("this model reads each text whole; it takes no text feed")
            max_frames = request.max_frames or 2048
            return Prompt(length=8, data=_Plan(frames=0, feed=feed), max_frames=max_frames)
        if request.input_audio is not None:
            return self._heard(request)
        text = request.text or ""
        plan = _Plan(frames=0)
        for m in _FAIL.finditer(text):
            if m.group(1) == "input":
                raise InputError("this request asked to be refused ([fail:input] in its text)")
            if m.group(1) == "prefill":
                plan.fail_prefill = True
            elif m.group(2) is not None:
                plan.fail_decode_at = int(m.group(2))
            else:
                plan.fail_codec_at = int(m.group(3))
        clean = _FAIL.sub("", text).strip()
        if not clean:
            raise InputError("the text is empty; give at least one word to speak")
        max_frames = request.max_frames or 2048
        if request.fixed_frames is not None:
            if request.fixed_frames < 0:
                raise InputError(f"fixed_frames must be >= 0, got {request.fixed_frames}")
            plan.frames = request.fixed_frames
        else:
            seconds = len(clean) / self.chars_per_second
            plan.frames = max(1, math.ceil(seconds * self.spec.frame_rate))
        plan.frames = min(plan.frames, max_frames)
        scale = request.cfg_scale if request.cfg_scale is not None else self.default_cfg
        if scale is not None and not scale >= 1:
            raise InputError(f"cfg_scale must be >= 1 (1 = no guidance), got {scale}")
        width = 2 if scale is not None and scale > 1 else 1
        return Prompt(length=8 + len(clean) // 4, data=plan, max_frames=max_frames, fixed_frames=plan.frames,
                      width=width, uncond_key="uncond" if width == 2 else None)  # as Dia's: one for all

    def _heard(self, request: SynthesisRequest) -> Prompt:
        """Audio in, text out (models/speechlm's transcription): the prompt is the clip's frames plus the
        interleave's fill and a few specials (T + codebooks + 3), and the encode (X-Codec, on the LM lane
        inside the prefill) is charged as ENCODE_TOKEN_SHARE extra prefill tokens per audio frame; the
        answer is ANSWER_TOKENS_PER_S text tokens per second of audio, plus the end token."""
        n = np.asarray(request.input_audio).shape[-1]
        rate = request.input_sample_rate or self.spec.sample_rate
        seconds = n / rate
        frames = max(1, int(seconds * self.spec.frame_rate))
        tokens = request.fixed_frames if request.fixed_frames is not None else \
            math.ceil(ANSWER_TOKENS_PER_S * seconds) + 1
        length = frames + self.spec.codebooks + 3 + math.ceil(ENCODE_TOKEN_SHARE * frames)
        return Prompt(length=length, data=_Plan(frames=0, text_tokens=max(1, tokens)), max_frames=1,
                      fixed_frames=0)

    def check(self, request: SynthesisRequest) -> None:
        self.prepare(request)  # prepare is cheap here: the one place its checks live

    def init_kv(self, num_pages: int, page_size: int) -> None:
        self.kv_pages = num_pages

    def init_codec_slots(self, num_slots: int) -> None:
        self.slots = num_slots

    def _frame(self, k: int) -> np.ndarray:
        while len(self._frames) <= k:
            self._frames.append(np.full(self.spec.codebooks, len(self._frames), dtype=np.int64))
        return self._frames[k]

    def _step(self, row: Row) -> StepOutput | Exception:
        plan: _Plan = row.prompt.data
        st: _RowState = row.state
        if plan.feed is not None:
            return self._fed_step(row, plan.feed, st)
        if plan.text_tokens:  # a text answer: one token per step, no frame
            st.emitted += 1
            row.kv_len += 1
            return StepOutput(frame=None, done=st.emitted >= plan.text_tokens, text_tokens=1)
        if st.emitted >= plan.frames:
            return StepOutput(frame=None, done=True)
        if st.lead < self.lead_steps:  # the delay pattern is still filling: a step, no frame
            st.lead += 1
            row.kv_len += 1
            return StepOutput(frame=None, done=False)
        if plan.fail_decode_at is not None and st.emitted == plan.fail_decode_at:
            # a per-row failure: reported in place of this row's output, the batch's other rows go on
            return InjectedFailure(f"injected decode failure at frame {st.emitted} "
                                   f"(request {row.request_id})")
        frame = self._frame(st.emitted)
        st.emitted += 1
        row.kv_len += 1
        return StepOutput(frame=frame, done=st.emitted >= plan.frames)

    def _fed_step(self, row: Row, feed: TextFeed, st: _RowState) -> StepOutput | Exception:
        words, closed = feed.snapshot(st.fed_words)
        st.fed_words += len(words)
        st.owed += sum(max(1, math.ceil((len(w) + 1) / self.chars_per_second * self.spec.frame_rate))
                       for w in words)
        row.kv_len += 1
        if st.lead < self.lead_steps:
            st.lead += 1
            return StepOutput(frame=None, done=False)
        frame = self._frame(st.emitted)  # a word's frame, or a pad while the next word is awaited
        st.emitted += 1
        done = (closed and st.emitted >= st.owed) or st.emitted >= row.prompt.max_frames
        stale = None if done else feed.stale()
        return InputError(stale) if stale else StepOutput(frame=frame, done=done)

    def prefill(self, rows: list[Row]) -> list[StepOutput]:
        for row in rows:
            if row.prompt.data.fail_prefill:
                raise InjectedFailure(f"injected prefill failure (request {row.request_id})")
        out = []
        for row in rows:
            row.state = _RowState()
            if row.slot >= 0:  # a role-lm row holds no slot (its codec runs elsewhere)
                self._slot_plan[row.slot] = row.prompt.data
            row.kv_len = row.prompt.length
            plan: _Plan = row.prompt.data
            # like Qwen3-TTS, the prefill samples a token but no complete frame exists yet
            out.append(StepOutput(frame=None, done=plan.frames == 0 and not plan.text_tokens
                                  and plan.feed is None))
        return out

    def decode(self, rows: list[Row]) -> list[StepOutput | Exception]:  # type: ignore[override]
        return [self._step(row) for row in rows]

    def codec(self, items: list[CodecItem]) -> list[np.ndarray]:
        # check everything first so a failing batch leaves every slot as it was
        for item in items:
            chunk_index = 0 if item.first else self._slot_chunk.get(item.slot)
            if chunk_index is None:
                raise RuntimeError(f"codec slot {item.slot} got a continuation chunk before its first chunk")
            expected = 0 if item.first else self._slot_next[item.slot]
            n = item.codes.shape[0]
            if n and int(item.codes[0, 0]) != expected:
                raise RuntimeError(f"codec slot {item.slot}: chunk starts at frame {int(item.codes[0, 0])}, "
                                   f"expected {expected} (chunks out of order)")
        spf = self.spec.samples_per_frame
        out = []
        for item in items:
            n = item.codes.shape[0]
            chunk_index = 0 if item.first else self._slot_chunk[item.slot]
            plan = self._slot_plan.get(item.slot)
            if plan is not None and plan.fail_codec_at == chunk_index:
                out.append(InjectedFailure(f"injected codec failure at chunk {chunk_index} "
                                           f"(slot {item.slot})"))
                continue
            start = 0 if item.first else self._slot_next[item.slot]
            self._slot_next[item.slot] = start + n
            self._slot_chunk[item.slot] = (0 if item.first else self._slot_chunk[item.slot]) + 1
            if self.pcm_scale == 0.0 or n == 0:
                pcm = np.zeros(n * spf, np.float32)  # silence: cheap, the sim decodes ~1000 chunks/s
            else:
                pcm = np.repeat(item.codes[:, 0].astype(np.float32) * np.float32(self.pcm_scale), spf)
            out.append(pcm)
        return out
