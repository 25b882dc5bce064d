"""Orpheus 3B (canopylabs; a plain transformers `LlamaForCausalLM`) as a voxcli model program.

The LM emits one flat token stream, seven tokens a frame (tokens.py); SNAC decodes the frames in the codec
lanes (codec.py). What the engine sees:

* Steps and frames. Each decode step samples one token; the step that completes a frame's seventh token
  returns the frame (its seven codes), the six before it return none. `Prompt.steps_per_frame` = 7 tells the
  admission gate that a first chunk of n frames costs 7n steps; the engine cuts chunks from whole frames, so
  a chunk boundary never splits a frame. KV: prompt + 7 positions a frame (`kv_tokens`).
* Sampling. Every step may only pick a code of its frame position's band, and the stop token 128258 only at
  a frame's start (so a stream is always whole frames of valid codes; a trained model puts nearly all its
  mass there anyway), so only those 4,097 rows of the 156,940-row head are computed. Then the repetition
  penalty (over prompt and output ids, transformers' rule), temperature, top-k, top-p and a draw from the
  request's own generator; `--greedy` is the argmax (the parity test checks it equals
  `LlamaForCausalLM.generate(do_sample=False)` token for token). Defaults: generation_config.json, else
  canopyai/Orpheus-TTS's (temperature 0.6, top-p 0.8, repetition penalty 1.3, 1200 tokens = 171 frames);
  greedy applies a repetition penalty only when the request sets one.
* Re-runnable stages (models/base.py): a step peeks the rows' uniforms and commits every row's state only
  after the whole batch sampled; KV writes go to the rows' own pages at positions >= kv_len.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..base import (
    CheckpointError,
    CodecItem,
    InputError,
    MemoryNeeds,
    ModelProgram,
    Prompt,
    Row,
    StepOutput,
    SynthesisRequest,
    check_numbers,
    check_voice_and_language,
)
from ..checkpoint import cached_snapshot, checkpoint_entries, fill_module, offline_note, read_json, resolve
from ..device_memory import pool_zeros
from ..dtypes import dtype_name
from ..layers import PagedBatch
from ..sampling import draw, request_generator, top_k_filter, top_p_filter
from .codec import DEFAULT_MODE, OrpheusCodec
from .config import GenerationDefaults, OrpheusConfig, parse_config
from .layers import OrpheusWeights
from .options import OPTIONS
from .spec import DTYPE_POLICY, model_spec
from .tokens import (
    CODES,
    DEFAULT_VOICE,
    END_OF_SPEECH,
    FRAME_TOKENS,
    band,
    frame_codes,
    prompt_ids,
    prompt_text,
)

SNAC_HUB_ID = "hubertsiuzdak/snac_24khz"
NEG_INF = float("-inf")
UNIFORM_BLOCK = 64


@dataclass(frozen=True)
class RowSampling:
    greedy: bool
    temperature: float
    top_k: int
    top_p: float
    repetition_penalty: float


@dataclass
class PreparedOrpheus:
    ids: list[int]
    sampling: RowSampling
    seed: int | None
    snac_stream: str


@dataclass
class OrpheusState:
    sampling: RowSampling
    gen: torch.Generator
    last: int  # the token the next step feeds
    frame: list[int]  # this frame's tokens so far
    seen: torch.Tensor | None  # [V] bool: ids the repetition penalty applies to (None: no penalty)
    fixed: bool
    cap: int  # frames at most (fixed: exactly)
    ublock: torch.Tensor | None = None
    uidx: int = 0


def _peek_uniform(st: OrpheusState) -> float:
    if st.ublock is None or st.uidx >= st.ublock.shape[0]:
        st.ublock = torch.rand(UNIFORM_BLOCK, generator=st.gen, dtype=torch.float64)
        st.uidx = 0
    return float(st.ublock[st.uidx])


def resolve_codec(root: Path) -> Path:
    """The SNAC folder: `root/codec` when the checkpoint carries it (tests, the demo), else the local hub
    cache's hubertsiuzdak/snac_24khz (found as Dia finds its DAC). Never downloads."""
    local = Path(root) / "codec"
    if local.is_dir():
        return local
    snap = cached_snapshot(SNAC_HUB_ID)
    if snap is None:
        raise CheckpointError(
            f"the SNAC codec {SNAC_HUB_ID!r} that Orpheus decodes with is not in the local Hugging Face cache"
            f"{offline_note()}; download it with `vox models pull {SNAC_HUB_ID}` or put its folder "
            f"(config.json + pytorch_model.bin) at {local}"
        )
    return snap


class OrpheusProgram(ModelProgram):
    option_schema = OPTIONS

    def __init__(
        self,
        root: Path,
        cfg: OrpheusConfig,
        gen: GenerationDefaults,
        weights: OrpheusWeights,
        tokenizer,
        device: torch.device,
        dtype: torch.dtype,
        name: str,
    ) -> None:
        self.root, self.cfg, self.gen, self.weights, self.tok = root, cfg, gen, weights, tokenizer
        self.device, self.dtype = device, dtype
        local = root / "codec" / "config.json"
        self.spec = model_spec(name, cfg.max_position_embeddings, local if local.exists() else None)
        self.k_pool: torch.Tensor | None = None
        self.v_pool: torch.Tensor | None = None
        self.page_size = 0
        self._codec: OrpheusCodec | None = None

    @classmethod
    def load(cls, source: str, device: str = "cpu", dtype: str = "float32") -> OrpheusProgram:
        lm_dtype = DTYPE_POLICY.torch_dtype("lm", dtype)
        from tokenizers import Tokenizer

        root = resolve(source)
        cfg = parse_config(read_json(root / "config.json"), str(root / "config.json"))
        tpath = root / "tokenizer.json"
        if not tpath.exists():
            raise CheckpointError(f"{tpath} is missing; an Orpheus checkpoint needs its tokenizer files")
        try:
            tok = Tokenizer.from_file(str(tpath))
        except Exception as e:  # noqa: BLE001 - the library raises plain Exceptions for bad files
            raise CheckpointError(f"cannot read {tpath} ({e})") from None
        gpath = root / "generation_config.json"
        gen = GenerationDefaults.from_dict(read_json(gpath)) if gpath.exists() else GenerationDefaults()
        with torch.device("meta"):
            weights = OrpheusWeights(cfg).to(lm_dtype)
        ignore = ("lm_head.",) if cfg.tie_word_embeddings else ()
        fill_module(weights, checkpoint_entries(root), root, device, lm_dtype, ignore_prefixes=ignore)
        name = source if not Path(source).exists() else root.name
        return cls(root, cfg, gen, weights.eval(), tok, torch.device(device), lm_dtype, name)

    @property
    def codec_model(self) -> OrpheusCodec:
        if self._codec is None:
            self._codec = OrpheusCodec.load(
                resolve_codec(self.root), device=str(self.device),
                dtype=DTYPE_POLICY.torch_dtype("codec", dtype_name(self.dtype)),
            )
        return self._codec

    # --- host: prompts ---------------------------------------------------------------------------
    def resolve_sampling(self, req: SynthesisRequest) -> RowSampling:
        s, g = req.sampling, self.gen
        greedy = s.greedy or not g.do_sample
        rp = (
            s.repetition_penalty
            if s.repetition_penalty is not None
            else (1.0 if greedy else g.repetition_penalty)
        )
        return RowSampling(
            greedy=greedy,
            temperature=s.temperature if s.temperature is not None else g.temperature,
            top_k=s.top_k if s.top_k is not None else g.top_k,
            top_p=s.top_p if s.top_p is not None else g.top_p,
            repetition_penalty=rp,
        )

    def check(self, request: SynthesisRequest) -> None:
        check_numbers(request)
        check_voice_and_language(self.spec, request)
        if request.cfg_scale is not None and request.cfg_scale != 1:
            raise InputError(
                f"model {self.spec.name} has no classifier-free guidance: leave cfg_scale unset "
                f"or 1, got {request.cfg_scale}"
            )
        if request.ref_audio is not None or request.ref_text is not None:
            raise InputError(
                f"model {self.spec.name} does not clone voices; choose one of its voices "
                f"({', '.join(self.spec.voices)}) instead of a reference clip"
            )
        if request.instructions:
            raise InputError(
                f"model {self.spec.name} takes no instructions; put emotive tags such as <laugh> "
                "in the text instead"
            )
        if not request.text or not request.text.strip():
            raise InputError("the text is empty; give something to say")
        self.options_of(request)

    def voice_of(self, request: SynthesisRequest) -> str:
        if request.voice is None:
            return DEFAULT_VOICE
        return self.spec.resolve_voice(request.voice, request.voice_paths).name

    def prepare(self, request: SynthesisRequest) -> Prompt:
        self.check(request)
        opts = self.options_of(request)
        ids = prompt_ids(self.tok.encode(prompt_text(request.text, self.voice_of(request))).ids)
        default = max(1, self.gen.max_new_tokens // FRAME_TOKENS)
        max_frames = request.max_frames if request.max_frames is not None else default
        frames = request.fixed_frames if request.fixed_frames is not None else max_frames
        if len(ids) + FRAME_TOKENS * frames + 1 > self.cfg.max_position_embeddings:
            raise InputError(
                f"the prompt ({len(ids)} tokens) and {frames} frames of 7 tokens exceed the model's "
                f"{self.cfg.max_position_embeddings} positions; shorten the text or lower max_frames"
            )
        data = PreparedOrpheus(
            ids=ids,
            sampling=self.resolve_sampling(request),
            seed=request.seed,
            snac_stream=str(opts["snac_stream"] or DEFAULT_MODE),
        )
        return Prompt(
            length=len(ids),
            data=data,
            max_frames=max_frames,
            fixed_frames=request.fixed_frames,
            steps_per_frame=FRAME_TOKENS,
        )

    def kv_tokens(self, prompt: Prompt) -> int:
        frames = prompt.max_frames if prompt.fixed_frames is None else prompt.fixed_frames
        return prompt.length + FRAME_TOKENS * frames + 1

    # --- device resources ------------------------------------------------------------------------
    def init_kv(self, num_pages: int, page_size: int) -> None:
        c = self.cfg
        shape = (c.num_hidden_layers, num_pages, page_size, c.num_key_value_heads, c.head_dim)
        self.k_pool = pool_zeros(shape, self.dtype, self.device)
        self.v_pool = pool_zeros(shape, self.dtype, self.device)
        self.page_size = page_size

    def memory_needs(self) -> MemoryNeeds:
        c = self.cfg
        el = torch.tensor([], dtype=self.dtype).element_size()
        kv = 2 * c.num_hidden_layers * c.num_key_value_heads * c.head_dim * el
        default_frames = max(1, self.gen.max_new_tokens // FRAME_TOKENS)
        return MemoryNeeds(
            kv_bytes_per_position=kv,
            codec_slot_bytes=0,  # a slot's history is six frames of codes on the host
            gather_bytes_per_position=kv
            // c.num_hidden_layers
            * (c.num_attention_heads // c.num_key_value_heads),
            prefill_bytes_per_token=(4 * c.hidden_size + 2 * c.intermediate_size) * el,
            prefill_bytes_per_token_pair=c.num_attention_heads * 4,
            decode_bytes_per_row=(4 * c.hidden_size + 2 * c.intermediate_size) * el + 3 * 4 * c.vocab_size,
            codec_bytes_per_frame=2048 * 64 * 4 * 4,  # the widest SNAC activations: 64 channels at 24 kHz
            # a frame is 7 positions where the engine plans 1 (its max_frames counts frames)
            extra_positions_per_row=(FRAME_TOKENS - 1) * default_frames,
        )

    def init_codec_slots(self, num_slots: int) -> None:
        self.codec_model.init_slots(num_slots)

    def codec_binding(self, prompt: Prompt) -> dict[str, object]:
        p: PreparedOrpheus = prompt.data
        # SNAC's noise seed: the request's; a greedy request without one takes 0, so that greedy is
        # deterministic end to end (the codes always are; the noise would not be)
        seed = p.seed if p.seed is not None else (0 if p.sampling.greedy else secrets.randbits(63))
        return {"mode": p.snac_stream, "seed": int(seed)}

    def bind_codec_slot(self, slot: int, binding: dict[str, object] | None) -> None:
        if binding is None:
            raise ValueError(
                f"codec slot {slot}: an Orpheus request always binds its SNAC mode and noise seed"
            )
        self.codec_model.bind(slot, str(binding["mode"]), int(binding["seed"]))  # type: ignore[call-overload]

    # --- stages ----------------------------------------------------------------------------------
    def _paged(self, rows: list[Row], starts: list[int], counts: list[int]) -> PagedBatch:
        if self.k_pool is None:
            raise RuntimeError("the KV pool is not allocated: call init_kv(num_pages, page_size) first")
        return PagedBatch.for_rows(rows, starts, counts, self.page_size, self.device)

    def _candidates(self, hidden: torch.Tensor, states: list[OrpheusState]) -> torch.Tensor:
        """Per row the scores of the tokens it may pick, [R, CODES + 1]: its frame position's band (column c =
        code c) and, in the last column, the stop token (a frame's start only, never for a bench row; else
        -inf); then the repetition penalty. Only those rows of the head are computed."""
        R = len(states)
        out = torch.full((R, CODES + 1), NEG_INF, device=hidden.device)
        for b, st in enumerate(states):
            lo, hi = band(len(st.frame))
            out[b, :CODES] = self.weights.logits_of(hidden[b], lo, hi)
            if not st.frame and not st.fixed:
                out[b, CODES] = self.weights.logits_of(hidden[b], END_OF_SPEECH, END_OF_SPEECH + 1)[0]
            p = st.sampling.repetition_penalty
            if p != 1.0 and st.seen is not None:
                seen = st.seen[lo:hi]
                s = out[b, :CODES]
                out[b, :CODES] = torch.where(seen, torch.where(s < 0, s * p, s / p), s)
                if st.seen[END_OF_SPEECH]:
                    e = out[b, CODES]
                    out[b, CODES] = e * p if e < 0 else e / p
        return out

    def _step(self, rows: list[Row], hidden: torch.Tensor, kv_len: list[int]) -> list[StepOutput]:
        states: list[OrpheusState] = [r.state for r in rows]
        scores = self._candidates(hidden, states)
        greedy = torch.tensor([st.sampling.greedy for st in states], device=scores.device)
        if bool(greedy.all()):
            picks = scores.argmax(-1).tolist()
        else:
            dev = scores.device
            temp = torch.tensor(
                [1.0 if s.sampling.greedy else s.sampling.temperature for s in states], device=dev
            )
            sc = (scores / temp[:, None])[:, None]  # [R, 1, V]: the shared filters' codebook axis
            sc = top_k_filter(
                sc, torch.tensor([0 if s.sampling.greedy else s.sampling.top_k for s in states], device=dev)
            )
            sc = top_p_filter(
                sc, torch.tensor([1.0 if s.sampling.greedy else s.sampling.top_p for s in states], device=dev)
            )
            u = torch.tensor([[_peek_uniform(s)] for s in states], dtype=torch.float64, device=dev)
            picks = draw(sc, greedy, u)[:, 0].tolist()
        out = []
        # commit: nothing below raises (a pick is a code of the row's band or the stop token)
        for r, st, pick, n in zip(rows, states, picks, kv_len, strict=True):
            if not st.sampling.greedy:
                st.uidx += 1
            r.kv_len = n
            tok = END_OF_SPEECH if pick == CODES else band(len(st.frame))[0] + pick
            st.last = tok
            if st.seen is not None:
                st.seen[tok] = True
            if tok == END_OF_SPEECH:
                out.append(StepOutput(frame=None, done=True))
                continue
            st.frame.append(tok)
            if len(st.frame) < FRAME_TOKENS:
                out.append(StepOutput(frame=None, done=False))
                continue
            frame = frame_codes(st.frame)
            st.frame = []
            r.frames_emitted += 1
            out.append(StepOutput(frame=frame, done=r.frames_emitted >= st.cap))
        return out

    @torch.inference_mode()
    def prefill(self, rows: list[Row]) -> list[StepOutput]:
        if not rows:
            return []
        states = []
        for r in rows:
            p: PreparedOrpheus = r.prompt.data
            fixed = r.prompt.fixed_frames is not None
            seen = None
            if p.sampling.repetition_penalty != 1.0:
                seen = torch.zeros(self.cfg.vocab_size, dtype=torch.bool, device=self.device)
                seen[torch.tensor(p.ids, device=self.device)] = True
            states.append(
                OrpheusState(
                    sampling=p.sampling,
                    gen=request_generator(p.seed),
                    last=-1,
                    frame=[],
                    seen=seen,
                    fixed=fixed,
                    cap=r.prompt.fixed_frames if fixed else r.prompt.max_frames,
                )
            )
        lengths = [r.prompt.length for r in rows]
        ids = torch.zeros(len(rows), max(lengths), dtype=torch.long)
        for b, r in enumerate(rows):
            ids[b, : lengths[b]] = torch.tensor(r.prompt.data.ids)
        pb = self._paged(rows, [0] * len(rows), lengths)
        hid = self.weights.hidden_states(ids.to(self.device), pb, self.k_pool, self.v_pool)
        last = hid[torch.arange(len(rows), device=self.device), torch.tensor(lengths, device=self.device) - 1]
        for r, st in zip(rows, states, strict=True):
            r.state, r.frames_emitted = st, 0
        out = self._step(rows, last, lengths)
        for r in rows:
            if r.slot >= 0:
                self.bind_codec_slot(r.slot, self.codec_binding(r.prompt))
        return out

    @torch.inference_mode()
    def decode(self, rows: list[Row]) -> list[StepOutput]:
        if not rows:
            return []
        ids = torch.tensor([[r.state.last] for r in rows], device=self.device)
        pb = self._paged(rows, [r.kv_len for r in rows], [1] * len(rows))
        hid = self.weights.hidden_states(ids, pb, self.k_pool, self.v_pool)[:, 0]
        return self._step(rows, hid, [r.kv_len + 1 for r in rows])

    def codec(self, items: list[CodecItem]) -> list[np.ndarray]:
        return self.codec_model.decode(items)

    def release(self, row: Row) -> None:
        if row.slot >= 0 and self._codec is not None and row.slot < len(self._codec.slots):
            self._codec.release_slot(row.slot)
        row.state = None
