"""ESPnet SpeechLM unified text+audio LMs (Bagpiper, OpusLM) as a voxcli model program.

What the engine sees:

* Rows. One request is one Row; with audio guidance w > 1 it is a width-2 row (`Prompt.width`, Dia's pair
  mechanism): the conditional sequence and its companion hold one page list split in two halves, run in
  the same forward passes, and are admitted, cancelled and freed together. The companion is idle in
  segments without CFG (Bagpiper's text plan) and restarts as an all-pad prefix as long as the
  conditional context when a CFG segment begins, exactly as `_prepare_cfg_cache` builds it. That pad
  prefix is the same for every companion (every input is pad, so position p's keys/values depend on p
  alone): one cached all-pad sequence is copied into the companion's pages and only its last position
  (the segment's modality token) runs forward.
* Steps. Every prefill/decode call is one forward pass per row (phases.py says which positions it feeds);
  all S streams of a step are sampled together from one hidden state: logits_s = W_H(h_t + e_s).
* Frames. Only audio segments yield frames, aligned (the delay interleave is undone here); a text step
  returns no frame, so the first chunk's TTFA includes the whole text phase, counted from submit.
  `Prompt.lead_steps` tells the admission gate how many frameless steps to expect: the delay fill (N - 1),
  the modality passes, and the text phase, estimated per request from the text-plan-to-prompt length ratio
  this program has observed so far (before any observation: the text rules' max_step, a bound).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from ..base import (
    CheckpointError,
    CodecItem,
    InputError,
    ModelProgram,
    Prompt,
    Row,
    StepOutput,
    SynthesisRequest,
    TextEvents,
    TextGrew,
    TextWritten,
    check_numbers,
)
from ..dtypes import dtype_name
from ..layers import PagedBatch
from ..sampling import request_generator
from .config import ASSISTANT, BOS, EOS, EOT, SPECIAL_ID, SpeechLMConfig, is_speechlm_dir, load_config
from .head import CandidateHead
from .options import MAX_SEGMENTS, OPTIONS
from .phases import DETECT, Masks, Phase, special
from .spec import DEFAULT_CHUNKS, DTYPE_POLICY, speechlm_spec  # noqa: F401 - DEFAULT_CHUNKS re-exported
from .text import TextIO
from .weights import load_lm

log = logging.getLogger(__name__)


@dataclass
class PreparedSpeechLM:
    tokens: np.ndarray  # [L, S] the prompt (no <assistant>)
    text_tokens: int  # the prompt's text tokens (what the text-phase estimate scales with)
    phase: Phase  # a template; prefill copies it into the row's state
    seed: int | None
    key: str | None  # the request id, for the text sink
    # user audio turns still to encode: (first row of the block in `tokens`, waveform [1, T * hop] at the
    # codec rate, T); prefill encodes them into `tokens` (the LM lane's work: see `fill_audio`)
    audio: list[tuple[int, torch.Tensor, int]] = field(default_factory=list)


@dataclass
class RowState:
    phase: Phase
    per_seq: int  # pages per sequence
    prepared: PreparedSpeechLM
    texts: list[str] = field(default_factory=list)  # the text segments, detokenized, in order
    streamed: str = ""  # the current text segment's text already given to text_grew


class SpeechLMProgram(ModelProgram):
    option_schema = OPTIONS  # models/speechlm/options.py (max_segments...)

    def __init__(self, cfg: SpeechLMConfig, lm, text: TextIO, device: torch.device, dtype: torch.dtype,
                 name: str) -> None:
        self.cfg, self.lm, self.text_io = cfg, lm, text
        self.device, self.dtype = device, dtype
        lay = cfg.layout
        self.spec = speechlm_spec(cfg, name)
        self.masks = Masks(lay, device)
        self.head = CandidateHead(lay, device)
        b = cfg.backbone.block
        self.kv_shape = (b.num_hidden_layers, b.num_key_value_heads, b.head_dim)
        self.k_pool: torch.Tensor | None = None
        self.v_pool: torch.Tensor | None = None
        self.page_size = 0
        self._codec = None
        self._audio_encoder = None  # X-Codec's encoder, loaded on the first audio-in request
        # each text segment as it ends (`--show-text`, `vox transcribe`): the contract's typed event
        self.text_written: TextEvents[TextWritten] = TextEvents()
        # the text as it is decoded, after every text token (`vox transcribe`, transcript.text.delta)
        self.text_grew: TextEvents[TextGrew] = TextEvents()
        self._text_ratio: float | None = None  # observed text-phase steps per prompt text token (EMA)
        # The companion's all-pad prefix: position p's keys/values depend only on p (every input is pad),
        # so they are the same for every companion of every request; computed once (for the longest
        # prefix asked so far) and copied into a restarting companion's pages instead of a forward pass.
        self.share_pad_prefix = True
        self._pad_kv: tuple[torch.Tensor, torch.Tensor] | None = None  # [L, T, H, D] each

    # --- loading ---------------------------------------------------------------------------------
    @classmethod
    def load(cls, source: str, device: str = "cpu", dtype: str = "float32") -> SpeechLMProgram:
        lm_dtype = DTYPE_POLICY.torch_dtype("lm", dtype)
        root = Path(source).expanduser()
        if not is_speechlm_dir(root):
            raise CheckpointError(f"{root} is not an ESPnet SpeechLM checkpoint folder (one train*.yaml, "
                                  "inference.yaml and model.pt)")
        cfg = load_config(root)
        lm = load_lm(cfg, torch.device(device), lm_dtype)
        return cls(cfg, lm, TextIO(cfg.tokenizer_dir), torch.device(device), lm_dtype, root.name)

    def _codec_rates(self) -> tuple[int, int]:
        from .codec import codec_rates

        return codec_rates(self.cfg)

    @property
    def codec_model(self):
        if self._codec is None:
            from .codec import load_codec

            codec_dtype = DTYPE_POLICY.name("codec", dtype_name(self.dtype))
            self._codec = load_codec(self.cfg, self.device, codec_dtype)
        return self._codec

    @property
    def audio_encoder(self):
        """X-Codec's encoder (xcodec_encoder.py), with model.pt's codec weights as ESPnet loads them."""
        if self._audio_encoder is None:
            from .codec import codec_folder
            from .weights import read_module
            from .xcodec_encoder import XcodecEncoder

            pt = self.cfg.root / "model.pt"
            self._audio_encoder = XcodecEncoder.load(codec_folder(self.cfg), read_module(pt),
                                                     self.cfg.layout.codec_streams, self.device,
                                                     where=str(pt))
        return self._audio_encoder

    def hears(self) -> str | None:
        """None when this checkpoint takes a user audio turn, else why not (one sentence)."""
        from .audio_in import refuse_reason

        return refuse_reason(self.cfg)

    # --- host: prompts ---------------------------------------------------------------------------
    def _messages(self, request: SynthesisRequest) -> list[tuple[str, str, object]]:
        """ESPnet's task templates: text_to_audio is one user text message, audio_to_text one user audio
        message; instructions become a system text message before it (the dialogue form, as the
        preprocessor lays one out). Entries: (role, modality, content)."""
        msgs: list[tuple[str, str, object]] = []
        if request.instructions:
            msgs.append(("system", "text", request.instructions))
        if request.input_audio is not None:
            msgs.append(("user", "audio", request.input_audio))
        else:
            msgs.append(("user", "text", request.text))
        return msgs

    def text_only(self, request: SynthesisRequest) -> bool:
        """The request's answer is text alone: one segment asked for, or the checkpoint enforces [text]."""
        asked = self.options_of(request)["max_segments"]
        enforced = list(self.cfg.inference.enforce_modality)
        return (asked is not None and int(asked) == 1) or enforced == ["text"]

    def check(self, request: SynthesisRequest) -> None:
        if request.input_audio is not None:
            why = self.hears()
            if why is not None:
                raise InputError(why)
            if request.text and request.text.strip():
                raise InputError("give either text or input audio as the user turn, not both")
            if request.ref_audio is not None:
                raise InputError(f"model {self.spec.name} takes no reference audio; the input audio is the "
                                 "user's turn")
            from .audio_in import check_clip

            check_clip(request.input_audio, request.input_sample_rate, self.spec.samples_per_frame,
                       self.spec.sample_rate)
        elif not request.text or not request.text.strip():
            raise InputError("the text is empty; give some text to speak")
        if request.voice is not None:
            raise InputError(f"model {self.spec.name} has no named voices; drop the voice")
        if request.ref_audio is not None:
            raise InputError(f"model {self.spec.name} takes no reference audio (text-to-speech only)")
        check_numbers(request)
        self.options_of(request)
        w = request.cfg_scale
        if w is not None and not (math.isfinite(w) and w >= 1):
            raise InputError(f"cfg_scale must be a number >= 1, got {request.cfg_scale}")
        if "audio" not in self.cfg.inference.rules and not self.text_only(request):
            raise InputError(f"{self.cfg.root / 'inference.yaml'} has no audio: rules, so this model "
                             "cannot speak")
        self._rules(request)

    def _rules(self, request: SynthesisRequest):
        inf = self.cfg.inference
        s = request.sampling
        audio = inf.rules.get("audio")
        text = inf.rules.get("text")
        if audio is not None:
            audio = replace(audio, cfg=request.cfg_scale if request.cfg_scale is not None else audio.cfg)
            if s.temperature is not None:
                if s.temperature < 0:
                    raise InputError(f"temperature must be >= 0, got {s.temperature}")
                audio = replace(audio, temperature=s.temperature)
            if s.top_k is not None:
                if s.top_k < 1:
                    raise InputError(f"top_k must be >= 1 for this model, got {s.top_k}")
                audio = replace(audio, topk=s.top_k)
            if request.max_frames is not None:
                if request.max_frames < 1:
                    raise InputError(f"max_frames must be >= 1, got {request.max_frames}")
                audio = replace(audio, max_step=min(audio.max_step,
                                                    request.max_frames + self.cfg.layout.audio_streams - 1))
        opts = self.options_of(request)  # checked and bounded by the schema (options.py)
        if text is not None and opts["text_temperature"] is not None:
            text = replace(text, temperature=float(opts["text_temperature"]))
        if text is not None and opts["text_top_k"] is not None:
            text = replace(text, topk=int(opts["text_top_k"]))
        if s.greedy:
            audio = audio and replace(audio, temperature=0.0)
            text = text and replace(text, temperature=0.0)
        return text, audio

    def prompt_tokens(self, request: SynthesisRequest) -> tuple[np.ndarray, int]:
        """[L, S]: <bos>, then per message <role><modality>, its rows and <eos> (<eot> when the next
        message has the same role); a text token id 0 stays pad 0, as the preprocessor maps it; an audio
        message is its delay-interleaved codes (audio_in.py)."""
        tokens, n, audio = self._layout_prompt(request)
        return self.fill_audio(tokens, audio), n

    def _layout_prompt(self, request: SynthesisRequest) -> tuple[np.ndarray, int, list]:
        """The prompt with each audio block left as pad rows, and the waveforms that fill them: the rows'
        count follows from the clip's length alone (T + S - 1), so the KV plan needs no encode."""
        S = self.cfg.layout.num_stream
        start = self.cfg.layout.text_start
        msgs = self._messages(request)
        rows = [special(BOS, S)]
        n_text = 0
        audio = []
        for i, (role, kind, content) in enumerate(msgs):
            rows += [special(SPECIAL_ID[role], S), special(SPECIAL_ID[kind], S)]
            if kind == "audio":
                wav, T = self._audio_input(content, request.input_sample_rate)
                audio.append((len(rows), wav, T))
                rows += [np.zeros(S, dtype=np.int64)] * (T + self.cfg.layout.audio_streams - 1)
                n_text += T  # what the text-phase estimate scales with: the prompt's content
            else:
                ids = self.text_io.encode(content)
                n_text += len(ids)
                for t in ids:
                    rows.append(special(0 if t == 0 else t + start, S))
            same = i + 1 < len(msgs) and msgs[i + 1][0] == role
            rows.append(special(EOT if same else EOS, S))
        return np.stack(rows), n_text, audio

    def _audio_input(self, pcm: np.ndarray, sample_rate: int | None) -> tuple[torch.Tensor, int]:
        """A clip -> its first channel at the codec rate, trimmed to T whole frames, and T (host work:
        a resampling conv, no model)."""
        from .audio_in import check_clip, resample_first_channel

        hop, rate = self.spec.samples_per_frame, self.spec.sample_rate
        x = check_clip(pcm, sample_rate, hop, rate)
        wav = resample_first_channel(x, int(sample_rate), rate)
        T = wav.shape[-1] // hop
        return wav[:, :T * hop].contiguous(), T

    def fill_audio(self, tokens: np.ndarray, audio: list[tuple[int, torch.Tensor, int]]) -> np.ndarray:
        """Encode each audio turn with X-Codec and write its delay-interleaved block into `tokens`
        (the reference's `_embed`, which encodes on the device right before the prefill)."""
        from .audio_in import audio_block

        if not audio:
            return tokens
        tokens = tokens.copy()
        lay = self.cfg.layout
        starts = np.asarray(lay.intervals[lay.audio_io], dtype=np.int64)[:, 0]
        for at, wav, T in audio:
            codes = self.audio_encoder.encode(wav[None])[0].T[:, :lay.codec_streams]
            block = audio_block(codes, T, starts)
            tokens[at:at + block.shape[0]] = block
        return tokens

    def prepare(self, request: SynthesisRequest) -> Prompt:
        self.check(request)
        text_rules, audio_rules = self._rules(request)
        tokens, n_text, audio = self._layout_prompt(request)
        inf = self.cfg.inference
        asked = self.options_of(request)["max_segments"]  # 1..MAX_SEGMENTS (options.py)
        default = min(MAX_SEGMENTS, max(2, len(inf.enforce_modality)))
        max_segments = int(asked) if asked is not None else default
        text_only = self.text_only(request)
        if text_only:  # no audio segment will run: no audio rules, no CFG companion for them
            audio_rules = None
            max_segments = 1 if asked is None and list(inf.enforce_modality)[:1] == ["text"] else max_segments
        width = 2 if (audio_rules is not None and audio_rules.cfg > 1) or \
            (text_rules is not None and text_rules.cfg > 1) else 1
        if request.fixed_frames is not None and request.fixed_frames < 1:
            raise InputError(f"fixed_frames must be >= 1, got {request.fixed_frames}")
        phase = Phase(inference=inf, layout=self.cfg.layout, width=width, audio_rules=audio_rules,
                      text_rules=text_rules, gen=torch.Generator(), max_segments=max_segments,
                      fixed_frames=request.fixed_frames)
        N = self.cfg.layout.audio_streams
        max_frames = 1 if audio_rules is None else max(1, audio_rules.max_step - N + 1)
        if request.fixed_frames is not None:
            max_frames = request.fixed_frames
        data = PreparedSpeechLM(tokens=tokens, text_tokens=n_text, phase=phase, seed=request.seed,
                                key=request.request_id, audio=audio)
        prompt = Prompt(length=tokens.shape[0] + 1, data=data, max_frames=max_frames,
                        fixed_frames=request.fixed_frames, width=width)
        prompt.lead_steps = self.lead_steps(n_text)
        return prompt

    def lead_steps(self, text_tokens: int) -> int:
        """Frameless steps (prefill included) a request is expected to take before its first frame: the
        delay fill (N - 1), the text phase when a text segment may come first, and one pass per detected
        modality (forced modality tokens ride along with other positions)."""
        inf = self.cfg.inference
        steps = self.cfg.layout.audio_streams - 1
        detect = not inf.enforce_modality
        text_first = (detect or inf.enforce_modality[0] == "text") and "text" in inf.rules
        if text_first:
            bound = inf.rules["text"].max_step
            est = bound if self._text_ratio is None else math.ceil(self._text_ratio * max(1, text_tokens))
            steps += min(bound, est)
        if detect:
            steps += 2 if text_first else 1
        return steps

    def _learn_text(self, st: RowState) -> None:
        if st.phase.text_steps:
            r = st.phase.text_steps / max(1, st.prepared.text_tokens)
            self._text_ratio = r if self._text_ratio is None else 0.8 * self._text_ratio + 0.2 * r

    # --- device resources ------------------------------------------------------------------------
    def seq_positions(self, prompt: Prompt) -> int:
        """Positions one sequence reaches at most: prompt, <assistant>, and per segment its modality token,
        max_step tokens, the final-token pass and the next <assistant>. Bounded work by construction: one
        term per enforced modality (the checkpoint's list), then one product for the free segments, so
        the cost does not grow with `max_segments` (itself at most MAX_SEGMENTS)."""
        p: PreparedSpeechLM = prompt.data
        ph = p.phase
        inf = self.cfg.inference
        total = prompt.length
        forced = inf.enforce_modality[:ph.max_segments]
        for m in forced:
            steps = ph.fixed_frames + self.cfg.layout.audio_streams - 1 \
                if m == "audio" and ph.fixed_frames is not None else ph.rules(m).max_step
            total += steps + 3
        free = ph.max_segments - len(forced)
        if free > 0:
            total += free * (max(ph.rules(m).max_step for m in inf.rules) + 3)
        return total

    def kv_tokens(self, prompt: Prompt) -> int:
        if self.page_size == 0:
            return self.seq_positions(prompt) * prompt.width
        per = -(-self.seq_positions(prompt) // self.page_size)
        return per * self.page_size * prompt.width

    def init_kv(self, num_pages: int, page_size: int) -> None:
        L, H, D = self.kv_shape
        self.k_pool = torch.zeros((L, num_pages, page_size, H, D), device=self.device, dtype=self.dtype)
        self.v_pool = torch.zeros_like(self.k_pool)
        self.page_size = page_size

    def init_codec_slots(self, num_slots: int) -> None:
        self.codec_model.init_slots(num_slots)

    # --- stages ----------------------------------------------------------------------------------
    def _start_row(self, r: Row) -> None:
        p: PreparedSpeechLM = r.prompt.data
        phase = replace(p.phase, gen=request_generator(p.seed), audio=[], text=[], texts=[])
        per = -(-self.seq_positions(r.prompt) // self.page_size)
        if len(r.pages) < per * r.prompt.width:
            raise RuntimeError(f"request {r.request_id} holds {len(r.pages)} KV pages, needs "
                               f"{per * r.prompt.width}")
        r.state = RowState(phase=phase, per_seq=per, prepared=p)
        r.frames_emitted = 0
        if p.audio:  # the user's audio turn: encoded now, on the LM lane, as part of this row's prefill
            p = replace(p, tokens=self.fill_audio(p.tokens, p.audio), audio=[])
            r.state.prepared = p
        phase.first_pass(p.tokens)

    @torch.inference_mode()
    def prefill(self, rows: list[Row]) -> list[StepOutput]:
        if not rows:
            return []
        if self.k_pool is None:
            raise RuntimeError("the KV pool is not allocated: call init_kv(num_pages, page_size) first")
        for r in rows:
            self._start_row(r)
        return self._run(rows)

    @torch.inference_mode()
    def decode(self, rows: list[Row]) -> list[StepOutput]:
        return self._run(rows) if rows else []

    def _run(self, rows: list[Row]) -> list[StepOutput]:
        """One forward pass for every row's pending Pass, then its logits' action."""
        seqs = []  # (row index, sequence, tokens, start position)
        for i, r in enumerate(rows):
            ph: Phase = r.state.phase
            p = ph.pending
            seqs.append((i, 0, p.cond, ph.cond_len))
            if p.uncond is not None and p.uncond_restart and self.share_pad_prefix and p.uncond.shape[0] > 1:
                pads = p.uncond.shape[0] - 1  # the all-pad prefix, then the segment's modality token
                self._copy_pad_prefix(r, pads)
                seqs.append((i, 1, p.uncond[pads:], pads))
            elif p.uncond is not None:
                seqs.append((i, 1, p.uncond, 0 if p.uncond_restart else ph.uncond_len))
        hidden: dict[tuple[int, int], torch.Tensor] = {}
        # one batch for the single-position sequences, one for the rest: a long prompt or a companion's
        # pad prefix must not pad every one-token row of a decode step to its length
        for group in ([s for s in seqs if s[2].shape[0] == 1], [s for s in seqs if s[2].shape[0] > 1]):
            if group:
                for key, h in zip([(s[0], s[1]) for s in group], self._forward(rows, group), strict=True):
                    hidden[key] = h
        for r in rows:
            r.state.phase.fed(r.state.phase.pending)
        return self._act(rows, hidden)

    def _forward(self, rows: list[Row], group: list) -> torch.Tensor:
        ps = self.page_size
        T = max(s[2].shape[0] for s in group)
        B = len(group)
        S = self.cfg.layout.num_stream
        x = torch.zeros((B, T, S), dtype=torch.long)
        q_pos = torch.zeros((B, T), dtype=torch.long)
        slots = torch.full((B, T), -1, dtype=torch.long)
        tables, lens, counts = [], [], []
        for b, (i, s, toks, start) in enumerate(group):
            st: RowState = rows[i].state
            pages = rows[i].pages[s * st.per_seq:(s + 1) * st.per_seq]
            n = toks.shape[0]
            if start + n > len(pages) * ps:
                raise RuntimeError(f"request {rows[i].request_id} needs {start + n} positions, holds "
                                   f"{len(pages) * ps}")
            x[b, :n] = torch.from_numpy(toks)
            pos = torch.arange(start, start + n)
            pg = torch.tensor(pages, dtype=torch.long)
            q_pos[b, :n] = pos
            slots[b, :n] = pg[pos // ps] * ps + pos % ps
            used = -(-(start + n) // ps)
            tables.append(pages[:used])
            lens.append(start + n)
            counts.append(n)
        P = max(len(t) for t in tables)
        table = torch.tensor([t + [t[0]] * (P - len(t)) for t in tables], dtype=torch.long)
        d = self.device
        pb = PagedBatch(q_pos.to(d), slots.to(d), table.to(d), torch.tensor(lens, device=d), ps)
        h = self.lm.hidden_states(self.lm.embed(x.to(d)).to(self.dtype), pb, self.k_pool, self.v_pool)
        return h[torch.arange(B, device=d), torch.tensor(counts, device=d) - 1]

    def drop_pad_prefix(self) -> None:
        """Forget the shared all-pad prefix's cached keys and values: the next CFG prefill that shares it
        computes it again (a benchmark timing the sharing starts each setting cold)."""
        self._pad_kv = None

    def _copy_pad_prefix(self, r: Row, n: int) -> None:
        """Positions [0, n) of row r's companion := the shared all-pad prefix's keys and values."""
        assert self.k_pool is not None and self.v_pool is not None
        if self._pad_kv is None or self._pad_kv[0].shape[1] < n:
            have = 0 if self._pad_kv is None else self._pad_kv[0].shape[1]
            self._pad_kv = self._pad_prefix(min(max(n, 2 * have, 64), self.spec.max_context))
        st: RowState = r.state
        ps = self.page_size
        pages = torch.tensor(r.pages[st.per_seq:2 * st.per_seq], dtype=torch.long)
        pos = torch.arange(n)
        slots = (pages[pos // ps] * ps + pos % ps).to(self.device)
        L, P = self.k_pool.shape[:2]
        for pool, cache in zip((self.k_pool, self.v_pool), self._pad_kv, strict=True):
            pool.view(L, P * ps, *pool.shape[3:])[:, slots] = cache[:, :n]

    def _pad_prefix(self, T: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values [layers, T, kv heads, head dim] of an all-pad sequence of T positions."""
        _, k, v = self._alone(np.zeros((T, self.cfg.layout.num_stream), dtype=np.int64))
        return k, v

    def _alone(self, tokens: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One sequence [T, S] from position 0 in a scratch KV pool of its own (the engine's pool is not
        touched): its hidden states [T, hidden] and keys, values [layers, T, kv heads, head dim]."""
        T = tokens.shape[0]
        ps = 16
        n = -(-T // ps)
        L, H, D = self.kv_shape
        k = torch.zeros((L, n, ps, H, D), device=self.device, dtype=self.dtype)
        v = torch.zeros_like(k)
        pos = torch.arange(T, device=self.device)[None]
        table = torch.arange(n, device=self.device)[None]
        pb = PagedBatch(pos, pos.clone(), table, torch.tensor([T], device=self.device), ps)
        x = self.lm.embed(torch.from_numpy(tokens).to(self.device)[None]).to(self.dtype)
        h = self.lm.hidden_states(x, pb, k, v)[0]
        return h, k.view(L, n * ps, H, D)[:, :T].clone(), v.view(L, n * ps, H, D)[:, :T].clone()

    @torch.inference_mode()
    def score(self, tokens: np.ndarray) -> torch.Tensor:
        """Teacher forcing: the unmasked stream logits [T, S, V] of every position of one sequence of
        tokens [T, S] (a scratch KV pool of its own; the engine's pool is not touched)."""
        return self.lm.stream_logits(self._alone(tokens)[0][None])[0]

    def _act(self, rows: list[Row], hidden: dict[tuple[int, int], torch.Tensor]) -> list[StepOutput]:
        """Per row its pass's action: DETECT (argmax under the modality mask, full vocabulary) or SAMPLE
        (the step's S tokens from the merged logits of each stream's own candidates, head.py)."""
        pending = [r.state.phase.pending for r in rows]
        tokens: dict[int, np.ndarray] = {}
        for modality in ("text", "audio"):
            idx = [i for i, (r, p) in enumerate(zip(rows, pending, strict=True))
                   if p.action != DETECT and r.state.phase.modality == modality]
            if idx:
                tokens.update(zip(idx, self._sample(modality, [rows[i] for i in idx],
                                                    [i for i in idx], hidden), strict=True))
        out: list[StepOutput] = []
        for i, (r, p) in enumerate(zip(rows, pending, strict=True)):
            ph = r.state.phase
            if p.action == DETECT:
                lg = self.lm.stream_logits(hidden[(i, 0)]).masked_fill(self.masks.modality, float("-inf"))
                ph.detected(int(lg[0].argmax()))
                out.append(self._output(r, None))
                continue
            wrote = int(ph.modality == "text" and int(tokens[i][0]) not in (EOS, EOT))  # a text token
            frame = ph.sampled(tokens[i])
            out.append(self._output(r, None if frame is None else self._codes(frame), wrote))
        return out

    def _sample(self, modality: str, rows: list[Row], at: list[int],
                hidden: dict[tuple[int, int], torch.Tensor]) -> list[np.ndarray]:
        phases = [r.state.phase for r in rows]
        rules = [ph.rules(modality) for ph in phases]
        bench = modality == "audio"  # fixed_frames (bench): exactly that many frames, never eos/eot
        late = torch.tensor([ph.step >= ru.min_step and not (bench and ph.fixed_frames is not None)
                             for ph, ru in zip(phases, rules, strict=True)], device=self.device)
        # a top-k past the candidates keeps them all: clamp, so the logits table never grows with k
        width = self.head.width(modality)
        k_min = max([min(ru.topk, width) for ru in rules if ru.temperature > 0] + [1])
        W, E = self.lm.lm_head.weight, self.lm.stream_emb.weight
        lg = self.head.logits(W, E, torch.stack([hidden[(i, 0)] for i in at]), modality, late, k_min)
        cfg = [j for j, ph in enumerate(phases) if ph.cfg_on]
        if cfg:
            u = self.head.logits(W, E, torch.stack([hidden[(at[j], 1)] for j in cfg]), modality, late[cfg],
                                 k_min)
            w = torch.tensor([rules[j].cfg for j in cfg], device=lg.device)[:, None, None]
            c = lg[cfg]
            merged = c * w + u * (1 - w)  # the reference's order of operations, then its mask again
            lg[cfg] = torch.where(torch.isinf(c), c, merged)
        greedy = [j for j, ru in enumerate(rules) if ru.temperature == 0]
        out: list[np.ndarray | None] = [None] * len(rows)
        if greedy:
            ids = self.head.to_ids(modality, lg[greedy].argmax(-1)).cpu().numpy()
            for j, t in zip(greedy, ids, strict=True):
                out[j] = t.astype(np.int64)
        for j, (ph, ru) in enumerate(zip(phases, rules, strict=True)):
            if ru.temperature == 0:
                continue
            vals, pos = torch.topk(lg[j], min(ru.topk, lg.shape[-1]))
            probs = torch.softmax(vals / ru.temperature, dim=-1)
            inner = torch.multinomial(probs.float().cpu(), num_samples=1, generator=ph.gen).to(pos.device)
            out[j] = self.head.to_ids(modality, torch.gather(pos, -1, inner).squeeze(-1)).cpu().numpy()
        return [o for o in out if o is not None]

    def _codes(self, frame: np.ndarray) -> np.ndarray:
        """Global ids of the N audio streams -> the codec's codes: clipped into each stream's interval
        without its pad slot, offset removed, SSL streams dropped (the reference's decode_batch)."""
        lay = self.cfg.layout
        iv = np.asarray(lay.intervals[lay.audio_io], dtype=np.int64)
        codes = np.clip(frame, iv[:, 0] + 1, iv[:, 1] - 1) - (iv[:, 0] + 1)
        return codes[lay.ssl_streams:]

    def _output(self, r: Row, frame: np.ndarray | None, text_tokens: int = 0) -> StepOutput:
        st: RowState = r.state
        ph = st.phase
        start = self.cfg.layout.text_start
        while ph.texts:
            ids = [t - start for t in ph.texts.pop(0)]
            text = self.text_io.decode(ids)
            st.texts.append(text)
            self._delta(st, text)
            st.streamed = ""
            self.text_written.emit(TextWritten(st.prepared.key, text, tuple(ids)))
        if ph.modality == "text" and ph.text and not ph.done:
            self._delta(st, self.text_io.decode([t - start for t in ph.text]))
        if frame is not None:
            r.frames_emitted += 1
        if ph.done:
            self._learn_text(st)
            if ph.end_reason.startswith("the model chose"):
                log.warning("request %s: %s", r.request_id, ph.end_reason)
        return StepOutput(frame=frame, done=ph.done, text_tokens=text_tokens)

    def _delta(self, st: RowState, text: str) -> None:
        if text.startswith(st.streamed) and len(text) > len(st.streamed):
            self.text_grew.emit(TextGrew(st.prepared.key, text[len(st.streamed):]))
        st.streamed = text if text.startswith(st.streamed) else st.streamed

    def codec(self, items: list[CodecItem]) -> list[np.ndarray]:
        return self.codec_model.decode(items)

    def release(self, row: Row) -> None:
        if row.slot >= 0 and self._codec is not None:
            self._codec.release_slot(row.slot)
        row.state = None


__all__ = ["SpeechLMProgram", "EOS", "EOT", "ASSISTANT"]
