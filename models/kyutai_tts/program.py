"""Kyutai TTS (moshi `TTSModel`, delayed streams modeling) as a voxcli model program.

Every LM step is one position of each row on the paged KV pool: its input is the text token the state
machine fed back at the previous step plus the 32 audio codes of the previous step (each codebook k read
only past its delay; the initial token before); the text head's token goes through the machine (machine.py:
new word / pad, the word's tokens fed over the next steps, the second text stream multiplexed in), then
the depformer (depth transformer) produces the step's 32 codes inside the same step, all rows together.
The audio is delayed by `audio_delay` (16 steps): the depformer first runs at step 16, codebook q's codes
count from step delays[q] + 16, and the frame a step emits is the delayed streams read back in time
(codebook q from step t - max_delay + delays[q]): frames begin at step max_delay + 16 (`lead_steps`).
A request ends `final_padding` steps past the audio delay after the machine consumed its last word.

Speaker conditioning: the voice's `speaker_wavs` (cross-attention keys/values per layer, computed once per
request at prefill), `control` + `cfg` (the distilled guidance strength: `cfg_scale`) summed into every
step. One pass per step: no doubled batch. Mimi (models/codecs/mimi, moshi's weight names) decodes in the
codec lanes with per-request slots.

Streaming text (`TextFeed`, models/text_feed.py; the spec's TEXT_STREAM mode): a request's words may
arrive while it runs; the machine pads while it waits for the next word (the row keeps stepping, the batch
never stalls); a feed open with no text for its idle limit fails its row alone (an InputError in place of
the row's StepOutput), so its pages come back. Re-runnable stages (models/base.py):
each stage computes on copies of the rows' host state and commits them in a loop that cannot raise.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..base import (
    CodecItem,
    InputError,
    ModelProgram,
    Prompt,
    Row,
    StepOutput,
    SynthesisRequest,
    check_numbers,
)
from ..checkpoint import fill_module, read_header, read_json, resolve
from ..codecs.mimi.codec import MimiCodec, load_codec
from ..codecs.mimi.layouts import deinterleave_rope, moshi_layout
from ..device_memory import pool_zeros
from ..layers import PagedBatch
from ..sampling import request_generator
from ..text_feed import TextFeed
from .checkpoint import lm_entries
from .config import KyutaiConfig, parse_config
from .layers import KyutaiLM
from .machine import Machine, MachineState, script_entries
from .options import OPTIONS
from .spec import DTYPE_POLICY, MAX_STEPS, model_spec

__all__ = ["KyutaiProgram", "TextFeed"]
from .step import depformer_frame, main_step

MAX_SPEAKERS = 5  # moshi TTSModel.max_speakers: the cross-attention source holds 5 voice slots
DEFAULT_CFG = 2.0  # delayed-streams-modeling tts_pytorch.py's cfg_coef
DEFAULT_STREAM_FRAMES = 1500  # a streaming text's frame cap (2 minutes) unless the request sets max_frames


@dataclass
class PreparedKyutai:
    text: str
    feed: TextFeed | None
    voice: Path
    cfg_index: int | None
    options: dict
    greedy: bool
    temperature: float
    seed: int | None


@dataclass
class KyState:
    machine: MachineState
    step: int  # the step the next call runs
    text_in: int  # the text token fed at that step
    audio: list[np.ndarray]  # the codes of the last max_delay + 1 steps, newest last
    cond_sum: torch.Tensor
    cross: list[tuple[torch.Tensor, torch.Tensor]]
    gen: torch.Generator
    fed_words: int = 0  # words of a streaming feed already in the machine
    final_padding: int = 4
    limit: int = MAX_STEPS
    text_log: list[tuple[int, int]] = field(default_factory=list)


class KyutaiProgram(ModelProgram):
    option_schema = OPTIONS

    def __init__(self, root: Path, cfg: KyutaiConfig, lm: KyutaiLM, codec: MimiCodec, tokenizer,
                 device: torch.device, dtype: torch.dtype, name: str) -> None:
        self.root, self.cfg, self.lm, self.codec_model, self.tok = root, cfg, lm, codec, tokenizer
        self.device, self.dtype = device, dtype
        self.spec = model_spec(cfg, root, name)
        self.k_pool: torch.Tensor | None = None
        self.v_pool: torch.Tensor | None = None
        self.page_size = 0
        self._cross_cache: dict[tuple[str, str], list] = {}

    # --- loading ---------------------------------------------------------------------------------
    @classmethod
    def load(cls, source: str, device: str = "cpu", dtype: str = "float32",
             part_dtypes: Mapping[str, str] | None = None) -> KyutaiProgram:
        """`part_dtypes`: a part's dtype instead of its DTYPE_POLICY rule (the exactness checks run the
        codec in float64)."""
        lm_dtype = DTYPE_POLICY.torch_dtype("lm", dtype)
        root = resolve(source)
        cfg = parse_config(read_json(root / "config.json"), root)
        with torch.device("meta"):
            lm = KyutaiLM(cfg)
        fill_module(lm, lm_entries(root, cfg), root, device, lm_dtype)
        mimi = cfg.mimi
        codec = load_codec(mimi, read_header(root / cfg.mimi_name), moshi_layout, str(root), device,
                           DTYPE_POLICY.torch_dtype("codec", dtype, part_dtypes), cfg.n_q,
                           after=lambda c: deinterleave_rope(c, mimi.head_dim))
        try:
            import sentencepiece
        except ImportError:  # pragma: no cover - the kyutai extra
            raise InputError("Kyutai TTS needs sentencepiece: pip install 'voxcli[kyutai]'") from None
        tok = sentencepiece.SentencePieceProcessor(model_file=str(root / cfg.tokenizer_name))
        name = source if not Path(source).exists() else root.name
        return cls(root, cfg, lm.eval(), codec, tok, torch.device(device), lm_dtype, name)

    # --- host: requests --------------------------------------------------------------------------
    def _voice(self, request: SynthesisRequest) -> Path:
        voice = request.voice or (self.spec.voices[0] if self.spec.voices else None)
        if voice is None:
            raise InputError(f"model {self.spec.name} needs a voice: a voice file "
                             f"(*{self.cfg.voice_suffix}) or a name from `vox voices`")
        resolved = self.spec.resolve_voice(voice, request.voice_paths)
        assert resolved.path is not None  # Kyutai's catalog holds files alone
        return resolved.path

    def _cfg_index(self, request: SynthesisRequest) -> int | None:
        w = DEFAULT_CFG if request.cfg_scale is None else float(request.cfg_scale)
        values = [float(v) for v in self.cfg.cfg_values]
        if w not in values:
            raise InputError(f"cfg_scale must be one of {', '.join(self.cfg.cfg_values)} for this model "
                             f"(its guidance is distilled into those values), got {w}")
        return values.index(w)

    def check(self, request: SynthesisRequest) -> None:
        check_numbers(request)
        self.options_of(request)
        self._voice(request)
        self._cfg_index(request)
        if request.language not in (None, "auto", "en", "fr"):
            raise InputError(f"Kyutai TTS speaks en and fr; got language {request.language!r}")
        for what, value in (("instructions", request.instructions), ("ref_audio", request.ref_audio),
                            ("input_audio", request.input_audio)):
            if value is not None:
                raise InputError(f"Kyutai TTS takes no {what}; its voice is a voice embedding (--voice)")
        if request.sampling.repetition_penalty not in (None, 1.0):
            raise InputError("Kyutai TTS has no repetition penalty; leave it unset")

    def prepare(self, request: SynthesisRequest, feed: TextFeed | None = None) -> Prompt:
        self.check(request)
        if feed is None and not (request.text and request.text.strip()):
            raise InputError("the text is empty")
        p = request.sampling
        temp = self.cfg.temp if p.temperature is None else float(p.temperature)
        opts = self.options_of(request)
        data = PreparedKyutai(text=request.text or "", feed=feed, voice=self._voice(request),
                              cfg_index=self._cfg_index(request), options=opts, greedy=p.greedy or temp == 0,
                              temperature=temp, seed=request.seed)
        frames = request.max_frames if request.max_frames is not None else self._frame_bound(data)
        if frames < 1:
            raise InputError(f"max_frames must be >= 1, got {request.max_frames}")
        return Prompt(length=1, data=data, max_frames=frames, fixed_frames=request.fixed_frames,
                      lead_steps=self.lead_steps)

    def _frame_bound(self, data: PreparedKyutai) -> int:
        """The most frames a complete text can take (its KV reservation): the machine spends at most
        initial_padding steps before the first word and, per word, its tokens, its forced padding and
        max_padding pads (then a new word is forced); then the audio delay and final_padding. A streaming
        text's length is unknown: DEFAULT_STREAM_FRAMES unless the request sets max_frames."""
        if data.feed is not None:
            return DEFAULT_STREAM_FRAMES
        o = data.options
        entries = script_entries(self.tok.encode, data.text, self.cfg.mimi.frame_rate, o["padding_between"])
        steps = o["initial_padding"] + sum(len(e.tokens) + e.padding + o["max_padding"] + 1 for e in entries)
        steps += self.cfg.audio_delay_steps + o["final_padding"] + 2
        return min(steps, MAX_STEPS) - self.lead_steps + max(self.cfg.delays)

    @property
    def lead_steps(self) -> int:
        return max(self.cfg.delays) + self.cfg.audio_delay_steps

    def kv_tokens(self, prompt: Prompt) -> int:
        frames = prompt.max_frames if prompt.fixed_frames is None else prompt.fixed_frames
        return prompt.length + self.lead_steps + frames + 1

    # --- device resources ------------------------------------------------------------------------
    def init_kv(self, num_pages: int, page_size: int) -> None:
        c = self.cfg
        shape = (c.num_layers, num_pages, page_size, c.num_heads, c.dim // c.num_heads)
        self.k_pool = pool_zeros(shape, self.dtype, self.device)
        self.v_pool = pool_zeros(shape, self.dtype, self.device)
        self.page_size = page_size

    def init_codec_slots(self, num_slots: int) -> None:
        self.codec_model.init_slots(num_slots)

    # --- per request conditioning ----------------------------------------------------------------
    def _cross(self, voice: Path, cfg_index: int | None) -> list[tuple[torch.Tensor, torch.Tensor]]:
        key = (str(voice), "")
        if key not in self._cross_cache:
            from safetensors.torch import load_file

            emb = load_file(str(voice))["speaker_wavs"]
            if emb.dim() != 3 or emb.shape[1] != self.cfg.speaker_dim:
                raise InputError(f"voice file {voice} must hold speaker_wavs [1, {self.cfg.speaker_dim}, T]")
            self._cross_cache[key] = self.lm.cross_kv(emb[0].to(self.device), MAX_SPEAKERS)
        return self._cross_cache[key]

    def _new_state(self, row: Row) -> KyState:
        p: PreparedKyutai = row.prompt.data
        o = p.options
        machine = Machine(self.cfg.text_card + 1, self.cfg.second_stream_ahead, o["max_padding"],
                          o["initial_padding"])
        if p.feed is None:
            entries = script_entries(self.tok.encode, p.text, self.cfg.mimi.frame_rate, o["padding_between"])
            ms = machine.new_state(entries, closed=True)
        else:
            ms = machine.new_state([], closed=False)
        fixed = row.prompt.fixed_frames
        limit = self.lead_steps + (fixed if fixed is not None else row.prompt.max_frames)
        empty = np.full(self.cfg.n_q, -1, dtype=np.int64)
        history = [empty] * (max(self.cfg.delays) + 1)
        return KyState(machine=ms, step=0, text_in=self.cfg.text_card, audio=history,
                       cond_sum=self.lm.condition_sum(p.cfg_index).to(self.device),
                       cross=self._cross(p.voice, p.cfg_index), gen=request_generator(p.seed),
                       final_padding=o["final_padding"], limit=min(limit, MAX_STEPS))

    def _feed(self, row: Row, st: KyState) -> None:
        """Move the words that arrived since the last step into the machine (streaming text)."""
        p: PreparedKyutai = row.prompt.data
        if p.feed is None:
            return
        o = p.options
        words, closed = p.feed.snapshot(st.fed_words)  # together: never closed without its last word
        if words:
            first = st.fed_words == 0
            st.machine.entries.extend(
                script_entries(self.tok.encode, " ".join(words), self.cfg.mimi.frame_rate,
                               o["padding_between"], first_turn=first))
            st.fed_words += len(words)
        st.machine.closed = closed

    # --- stages ----------------------------------------------------------------------------------
    def _machine(self, row: Row) -> Machine:
        o = row.prompt.data.options
        c = self.cfg
        return Machine(c.text_card + 1, c.second_stream_ahead, o["max_padding"], o["initial_padding"])

    def _pick(self, logits: torch.Tensor, states: list[KyState], greedy: list[bool], temps: list[float],
              top_k: int) -> torch.Tensor:
        """Greedy argmax (moshi's temp 0) or top-k sampling per row from its own generator."""
        out = logits.argmax(-1)
        for b, st in enumerate(states):
            if greedy[b]:
                continue
            probs = torch.softmax(logits[b] / temps[b], dim=-1)
            vals, idx = torch.topk(probs, min(top_k, probs.shape[-1]))
            noise = torch.empty(vals.shape, dtype=vals.dtype).exponential_(1, generator=st.gen)
            out[b] = idx[(vals.cpu() / noise).argmax()].to(out.device)
        return out

    def _step(self, rows: list[Row], states: list[KyState]) -> list[Any]:
        c = self.cfg
        if self.k_pool is None or self.v_pool is None:
            raise RuntimeError("the KV pool is not allocated: call init_kv(num_pages, page_size) first")
        work = [_host(st) for st in states]
        for r, w in zip(rows, work, strict=True):
            self._feed(r, w)
        tokens = np.zeros((len(rows), 1 + c.n_q), dtype=np.int64)
        for b, w in enumerate(work):
            t = w.step
            tokens[b, 0] = c.text_card if t == 0 else w.text_in
            for q in range(c.n_q):
                tokens[b, 1 + q] = c.card if t <= c.delays[q + 1] else w.audio[-1][q]
        pb = PagedBatch.for_rows(rows, [w.step for w in work], [1] * len(rows), self.page_size, self.device)
        dev = self.device
        greedy = [r.prompt.data.greedy for r in rows]
        temps = [r.prompt.data.temperature for r in rows]
        saved = [w.gen.get_state() for w in work]
        try:
            cond = torch.stack([w.cond_sum for w in work])
            hidden, text_logits = main_step(self.lm, torch.from_numpy(tokens).to(dev), cond,
                                            [w.cross for w in work], pb, self.k_pool, self.v_pool)
            text = self._pick(text_logits, work, greedy, temps, 25).cpu().numpy()
            fed = np.array([self._machine(r).process(w.step, w.machine, int(text[b]))
                            for b, (r, w) in enumerate(zip(rows, work, strict=True))], dtype=np.int64)
            codes = depformer_frame(self.lm, hidden, torch.from_numpy(fed).to(dev),
                                    lambda q, lg: self._pick(lg, work, greedy, temps, 250)).cpu().numpy()
        except BaseException:
            for st, g in zip(states, saved, strict=True):
                st.gen.set_state(g)
            raise
        out: list[Any] = []  # a StepOutput per row, or the InputError of a row whose text went stale
        md, delay = max(c.delays), c.audio_delay_steps
        for b, (r, st, w) in enumerate(zip(rows, states, work, strict=True)):
            t = w.step
            frame_codes = codes[b].copy()
            for q in range(c.n_q):
                if t < c.delays[q + 1] + delay:
                    frame_codes[q] = -1
            w.audio = [*w.audio[1:], frame_codes]
            w.text_log.append((int(text[b]), int(fed[b])))
            w.text_in = int(fed[b])
            w.step = t + 1
            frame = None
            if t >= md + delay:
                back = [w.audio[-1 - md + c.delays[q + 1]][q] for q in range(c.n_q)]
                frame = np.array(back, dtype=np.int64)
                r.frames_emitted += 1
            end = w.machine.end_step
            done = (end is not None and t + 1 >= end + delay + w.final_padding) or t + 1 >= w.limit
            r.kv_len = t + 1
            _commit(st, w)
            r.state = st
            feed = r.prompt.data.feed
            stale = feed.stale() if feed is not None and not done else None
            # a text that stopped arriving: this row alone fails (its pages come back), the batch goes on
            out.append(InputError(stale) if stale else StepOutput(frame=frame, done=done))
        return out

    @torch.inference_mode()
    def prefill(self, rows: list[Row]) -> list[StepOutput]:
        if not rows:
            return []
        states = [self._new_state(r) for r in rows]
        for r in rows:
            r.frames_emitted = 0
        return self._step(rows, states)

    @torch.inference_mode()
    def decode(self, rows: list[Row]) -> list[StepOutput]:
        if not rows:
            return []
        return self._step(rows, [r.state for r in rows])

    def codec(self, items: list[CodecItem]) -> list[np.ndarray]:
        return self.codec_model.decode_chunks(items)

    def release(self, row: Row) -> None:
        row.state = None


_HOST = ("machine", "step", "text_in", "audio", "fed_words", "text_log")


def _host(st: KyState) -> KyState:
    """A copy of the host part of a state (the device tensors and the generator shared, not copied)."""
    shallow = copy.copy(st)
    for k in _HOST:
        setattr(shallow, k, copy.deepcopy(getattr(st, k)))
    return shallow


def _commit(st: KyState, w: KyState) -> None:
    for k in _HOST:
        setattr(st, k, getattr(w, k))
