"""Qwen3-TTS (12 Hz) as a voxcli model program: the stages the engine drives (see models/base.py).

Per decode step and row: the code predictor turns the pending (h_t, c0_t) into the 15 residual codes of
frame t (emitted now), then the talker runs on frame t's summed embedding + the text term and samples
c0_{t+1}. So N talker tokens without EOS give N-1 frames and EOS at token k gives k frames, exactly as the
reference. All rows of a batch run together; KV lives in a paged pool whose pages the engine assigns.

Re-runnable stages (fault isolation, models/base.py): prefill builds each row's state from its prompt and
assigns it only at the end; decode peeks the rows' uniforms, computes the whole step, then commits every
row (uniforms consumed, h/c0/seen, kv_len) in a loop that cannot raise; the KV position a raised step
wrote is written again by the re-run. The codec checks every chunk, decodes, and scatters slot state back
only after the whole batch decoded (codec.py). The graph stages (graph_stages.py) are not re-runnable.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..base import (
    CodecItem,
    GraphStage,
    InputError,
    MemoryNeeds,
    ModelProgram,
    Prompt,
    ResourceLimits,
    Row,
    SamplingParams,
    StepOutput,
    SynthesisRequest,
)
from ..checkpoint import checkpoint_entries, fill_module, read_json, resolve
from ..device_memory import pool_zeros
from ..dtypes import dtype_name
from ..layers import PagedBatch
from ..text_tokenizer import TextTokenizer
from .config import GenerationDefaults, Qwen3TTSConfig, parse_config
from .options import OPTIONS
from .prompt import PromptEmbeds, build_prompt
from .row_state import MIN_NEW_TOKENS, RowState, next_uniforms, peek_uniforms
from .sampling import BatchSampling, RowSampling, select, talker_masks
from .spec import DEFAULT_CHUNKS, DTYPE_POLICY, SAMPLE_RATE, SAMPLES_PER_FRAME, model_spec  # noqa: F401 (re-exported)
from .talker import Qwen3TTSWeights
from .validate import QwenOptions, Validated, reference_clip, validate_request

if TYPE_CHECKING:
    from .codec import Qwen3TTSCodec



def assistant_text(text: str) -> str:
    return f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n"


def ref_text(text: str) -> str:
    return f"<|im_start|>assistant\n{text}<|im_end|>\n"


def instruct_text(text: str) -> str:
    return f"<|im_start|>user\n{text}<|im_end|>\n"


class Qwen3TTSProgram(ModelProgram):
    option_schema = OPTIONS  # models/qwen3_tts/options.py
    def __init__(
        self,
        root: Path,
        cfg: Qwen3TTSConfig,
        gen: GenerationDefaults,
        weights: Qwen3TTSWeights,
        tokenizer: TextTokenizer,
        device: torch.device,
        dtype: torch.dtype,
        name: str,
        codec: Qwen3TTSCodec | None = None,
    ) -> None:
        """`codec`: a codec built elsewhere (random weights drawn on the device, random_program.py); None
        reads the checkpoint's speech_tokenizer/ on first use (`codec_model`)."""
        self.root, self.cfg, self.gen, self.weights, self.tokenizer = root, cfg, gen, weights, tokenizer
        self.talker = weights.talker
        self.device, self.dtype = device, dtype
        tc = cfg.talker
        self.spec = model_spec(cfg, name)
        V = tc.vocab_size
        self.suppress = torch.zeros(V, dtype=torch.bool, device=device)
        self.suppress[V - 1024 :] = True  # the reference suppresses the top 1024 ids...
        self.suppress[tc.codec_eos_id] = False  # ...except EOS
        self.k_pool: torch.Tensor | None = None
        self.v_pool: torch.Tensor | None = None
        self.page_size = 0
        # Graph stages (graph_stages.py): padding rows/items write a KV page and a codec slot that the
        # engine never hands out, allocated one past the engine's counts by init_kv / init_codec_slots.
        self.scratch_page = 0
        self.scratch_slot = 0
        # The engine's bounds (set_limits); until it sets them, graphs use the model's context and
        # default chunk schedule (standalone use, tests).
        self.limits = ResourceLimits(
            max_kv_tokens_per_row=tc.block.max_position_embeddings,
            max_chunk_frames=max(DEFAULT_CHUNKS.first, *DEFAULT_CHUNKS.ramp, DEFAULT_CHUNKS.steady))
        self._lane_attention: dict[tuple[str, str], Any] = {}  # (lane, backend) -> LaneAttention
        self.attention_backend = "auto"  # graph decode attention: auto | flashinfer | torch
        self._codec = codec
        self._speaker_encoder = None
        self.slot_refs: dict[int, np.ndarray] = {}

    # --- loading ---------------------------------------------------------------------------------
    @classmethod
    def load(cls, source: str, device: str = "cpu", dtype: str = "float32") -> Qwen3TTSProgram:
        root = resolve(source)
        lm_dtype = DTYPE_POLICY.torch_dtype("lm", dtype)
        cfg = parse_config(read_json(root / "config.json"), str(root / "config.json"))
        gpath = root / "generation_config.json"
        gen = (GenerationDefaults.from_dict(read_json(gpath), str(gpath)) if gpath.exists()
               else GenerationDefaults())
        with torch.device("meta"):
            weights = Qwen3TTSWeights(cfg.talker)
        # speaker_encoder.* belongs to the audio side (loaded with the speaker encoder on demand).
        load_weights_meta(weights, root, device, lm_dtype)
        tok = TextTokenizer.from_dir(root)
        name = source if not Path(source).exists() else root.name
        return cls(root, cfg, gen, weights.eval(), tok, torch.device(device), lm_dtype, name)

    # --- host: prompts -----------------------------------------------------------------------------
    def resolve_sampling(self, p: SamplingParams, o: QwenOptions | None = None) -> RowSampling:
        """The request's sampling (`p`) and sub-talker options (`o`) over the checkpoint's defaults.
        top_k and sub_top_k: >= 0, 0 = no top-k filter (the reference's meaning)."""
        g = self.gen
        o = o or QwenOptions()

        def pick(v, default):
            return default if v is None else v

        greedy = p.greedy or not g.do_sample
        sub_greedy = (not g.subtalker_dosample) if o.sub_greedy is None else o.sub_greedy
        if p.greedy and o.sub_greedy is None:
            sub_greedy = True  # "greedy" asks for the deterministic path throughout
        rs = RowSampling(
            greedy=greedy,
            temperature=pick(p.temperature, g.temperature),
            top_k=pick(p.top_k, g.top_k),
            top_p=pick(p.top_p, g.top_p),
            repetition_penalty=pick(p.repetition_penalty, g.repetition_penalty),
            sub_greedy=sub_greedy,
            sub_temperature=pick(o.sub_temperature, g.subtalker_temperature),
            sub_top_k=pick(o.sub_top_k, g.subtalker_top_k),
            sub_top_p=pick(o.sub_top_p, g.subtalker_top_p),
        )
        for name in ("temperature", "sub_temperature"):
            if getattr(rs, name) <= 0:
                raise InputError(
                    f"sampling {name} must be > 0 (use greedy for deterministic output), "
                    f"got {getattr(rs, name)}"
                )
        for name in ("top_p", "sub_top_p"):
            if not 0 < getattr(rs, name) <= 1:
                raise InputError(f"sampling {name} must be in (0, 1], got {getattr(rs, name)}")
        for name in ("top_k", "sub_top_k"):
            if getattr(rs, name) < 0:
                raise InputError(f"sampling {name} must be >= 0 (0 = no top-k filter), "
                                 f"got {getattr(rs, name)}")
        if rs.repetition_penalty <= 0:
            raise InputError(f"repetition_penalty must be > 0, got {rs.repetition_penalty}")
        return rs

    def prepare(
        self,
        request: SynthesisRequest,
        *,
        x_vector: torch.Tensor | None = None,
        ref_codes: np.ndarray | None = None,
    ) -> Prompt:
        """Validate a request and build its prefill embeddings. `x_vector` / `ref_codes` inject a voice-
        clone prompt computed elsewhere (tests feed the reference package's own values)."""
        v = self._validate(request, has_injected_clone=x_vector is not None)
        sampling = self.resolve_sampling(request.sampling, v.options)
        max_frames = request.max_frames if request.max_frames is not None else self.gen.max_new_tokens - 1
        if max_frames < 1:
            raise InputError(f"max_frames must be >= 1, got {max_frames}")
        if request.fixed_frames is not None and request.fixed_frames < 1:
            raise InputError(f"fixed_frames must be >= 1, got {request.fixed_frames}")
        tc = self.cfg.talker
        speaker: torch.Tensor | None = None
        ids_ref: list[int] | None = None
        codes: np.ndarray | None = None
        if v.speaker is not None:
            speaker = self.talker.codec(torch.tensor(tc.speaker_ids[v.speaker], device=self.device))
        if self.cfg.model_type == "base":
            clip = reference_clip(request) if request.ref_audio is not None else None
            if x_vector is None:
                x_vector = self.x_vector(clip)
            speaker = x_vector
            if v.icl:
                codes = ref_codes if ref_codes is not None else self.reference_codes(clip)
                ids_ref = self.tokenizer.encode(ref_text(request.ref_text or ""))
        instruct = self.tokenizer.encode(instruct_text(request.instructions)) if v.instructions else None
        emb = build_prompt(
            self.talker,
            self.cfg,
            self.tokenizer.encode(assistant_text(request.text)),
            language_id=v.language_id,
            speaker=speaker,
            instruct_ids=instruct,
            streaming=v.streaming,
            ref_ids=ids_ref,
            ref_codes=codes,
        )
        data = PreparedPrompt(emb, sampling, request.seed)
        return Prompt(
            length=int(emb.embeds.shape[0]),
            data=data,
            max_frames=max_frames,
            fixed_frames=request.fixed_frames,
        )

    def check(self, request: SynthesisRequest) -> None:
        """Everything `prepare` refuses that needs no tokenizing or audio encoding (text, voice, language,
        instructions, reference audio, options, cfg_scale, sampling): early errors for the CLI."""
        v = self._validate(request)
        self.resolve_sampling(request.sampling, v.options)

    def _validate(self, request: SynthesisRequest, has_injected_clone: bool = False) -> Validated:
        return validate_request(self.cfg, request, has_injected_clone=has_injected_clone,
                                model=self.spec.name)

    def x_vector(self, wav: np.ndarray | None) -> torch.Tensor:
        from .speaker_encoder import SpeakerEncoder

        if self._speaker_encoder is None:
            self._speaker_encoder = SpeakerEncoder.from_checkpoint(
                self.root, device=self.device, dtype=self.dtype
            )
        return self._speaker_encoder.x_vector(np.asarray(wav, dtype=np.float32)).to(self.device, self.dtype)

    def reference_codes(self, wav: np.ndarray | None) -> np.ndarray:
        from .mimi_encoder import encode

        return np.asarray(encode(self.root, np.asarray(wav, dtype=np.float32)), dtype=np.int64)

    # --- device resources --------------------------------------------------------------------------
    def init_kv(self, num_pages: int, page_size: int) -> None:
        b = self.cfg.talker.block
        shape = (b.num_hidden_layers, num_pages + 1, page_size, b.num_key_value_heads, b.head_dim)
        self.scratch_page = num_pages  # the extra page: graph padding rows write here
        self.k_pool = pool_zeros(shape, self.dtype, self.device)
        self.v_pool = pool_zeros(shape, self.dtype, self.device)
        self.page_size = page_size
        self._lane_attention.clear()  # sized by the pool's page size and scratch page

    def set_limits(self, limits: ResourceLimits) -> None:
        self.limits = limits
        self._lane_attention.clear()

    def memory_needs(self) -> MemoryNeeds:
        from .codec import CodecDecoderConfig, read_tokenizer_config, speech_tokenizer_dir
        from .memory import memory_needs

        codec = CodecDecoderConfig.from_dict(read_tokenizer_config(speech_tokenizer_dir(self.root))
                                             ["decoder_config"])
        return memory_needs(self.cfg.talker, codec, self.dtype, codec_loaded=self._codec is not None)

    def init_codec_slots(self, num_slots: int) -> None:
        self.codec_model.init_slots(num_slots + 1)
        self.scratch_slot = num_slots  # the extra slot: graph padding items decode into it

    def graph_stage(self, stage: str, bucket: int, lane: str, device: Any = None) -> GraphStage | None:
        """The cuda executor's hook: a fixed-shape GraphStage for decode / codec (prefill stays eager).
        Call after init_kv / init_codec_slots: the graphs bind those buffers' addresses."""
        from .graph_stages import CodecGraphStage, DecodeGraphStage

        device = self.device if device is None else torch.device(device)
        if device.type != self.device.type or (device.index or 0) != (self.device.index or 0):
            raise RuntimeError(f"graph stages were asked for {device} but the model lives on {self.device}")
        if stage == "decode":
            if self.k_pool is None:
                raise RuntimeError("decode graphs need the KV pool: call init_kv before building the "
                                   "executor")
            # RoPE tables come from a CPU inv_freq; on the device once, so the step copies nothing.
            for rot in (self.talker.rotary, self.talker.code_predictor.rotary):
                rot.inv_freq = rot.inv_freq.to(device)
            s: Any = DecodeGraphStage(self, bucket, device, self.attention_backend, lane=lane)
        elif stage == "codec":
            if self.scratch_slot == 0:
                raise RuntimeError("codec graphs need the slot table: call init_codec_slots before "
                                   "building the executor")
            s = CodecGraphStage(self, bucket, device, self.limits.max_chunk_frames)
        else:
            return None
        return GraphStage(run=s.run, load=s.load, finish=s.finish, accepts=s.accepts, prime=s.prime,
                          prepare_next=getattr(s, "prepare_next", None),
                          plan_context=getattr(s, "plan_context", None))

    def lane_attention(self, lane: str, device: torch.device, backend: str = "auto") -> Any:
        """The decode attention of one lane (one object per bucket, one FlashInfer workspace per lane),
        sized by the engine's per-row KV bound."""
        from ..paged_attention import LaneAttention

        key = (lane, backend)
        if key not in self._lane_attention:
            b = self.cfg.talker.block
            kv_tokens = min(self.limits.max_kv_tokens_per_row, self.scratch_page * self.page_size)
            self._lane_attention[key] = LaneAttention(
                lane, backend=backend, num_qo_heads=b.num_attention_heads, num_kv_heads=b.num_key_value_heads,
                head_dim=b.head_dim, page_size=self.page_size,
                max_pages_per_row=max(1, -(-kv_tokens // self.page_size)), scratch_page=self.scratch_page,
                device=device, dtype=self.dtype)
        return self._lane_attention[key]

    @property
    def codec_model(self):
        if self._codec is None:
            from .codec import Qwen3TTSCodec

            codec_dtype = DTYPE_POLICY.torch_dtype("codec", dtype_name(self.dtype))
            self._codec = Qwen3TTSCodec.from_checkpoint(self.root, device=self.device, dtype=codec_dtype)
        return self._codec

    # --- stages ------------------------------------------------------------------------------------
    def _paged(self, rows: list[Row], starts: list[int], counts: list[int]) -> PagedBatch:
        if self.k_pool is None:
            raise RuntimeError("the KV pool is not allocated: call init_kv(num_pages, page_size) first")
        return PagedBatch.for_rows(rows, starts, counts, self.page_size, self.device)

    def _uniforms(self, states: list[RowState]) -> torch.Tensor:
        """16 uniforms per row per step from each request's own generator (15 predictor groups + c0),
        peeked: the step consumes them (`next_uniforms`) only once it has succeeded for every row, so a
        step that raises leaves the generators where they were (re-runnability, models/base.py)."""
        return torch.stack([peek_uniforms(s) for s in states]).to(self.device)

    def _sample_c0(
        self, logits: torch.Tensor, states: list[RowState], uniforms: torch.Tensor
    ) -> torch.Tensor:
        dev = logits.device
        seen = torch.stack([s.seen for s in states])
        penalty = torch.tensor([s.sampling.repetition_penalty for s in states], device=dev)
        generated = torch.tensor([s.generated for s in states], device=dev)
        eos = self.cfg.talker.codec_eos_id
        scores = talker_masks(logits.float(), seen, penalty, generated, eos, MIN_NEW_TOKENS, self.suppress)
        fixed = torch.tensor([s.fixed for s in states], device=dev)
        if bool(fixed.any()):  # bench rows never stop on EOS (and EOS is no codec code)
            scores[:, eos] = torch.where(
                fixed, torch.full_like(scores[:, eos], float("-inf")), scores[:, eos]
            )
        return select(scores, BatchSampling.talker([s.sampling for s in states], dev), uniforms)

    @torch.inference_mode()
    def prefill(self, rows: list[Row]) -> list[StepOutput]:
        if not rows:
            return []
        preps: list[PreparedPrompt] = [r.prompt.data for r in rows]
        lengths = [p.emb.embeds.shape[0] for p in preps]
        H = self.cfg.talker.block.hidden_size
        x = torch.zeros(len(rows), max(lengths), H, device=self.device, dtype=self.dtype)
        for b, p in enumerate(preps):
            x[b, : lengths[b]] = p.emb.embeds.to(self.dtype)
        pb = self._paged(rows, [0] * len(rows), lengths)
        hid = self.talker.hidden_states(x, pb, self.k_pool, self.v_pool)
        last = hid[torch.arange(len(rows), device=self.device), torch.tensor(lengths, device=self.device) - 1]
        logits = self.talker.codec_head(last)
        V = self.cfg.talker.vocab_size
        states = []
        for r, p in zip(rows, preps, strict=True):
            seed = p.seed if p.seed is not None else secrets.randbits(63)
            limit = r.prompt.max_frames if r.prompt.fixed_frames is None else r.prompt.fixed_frames
            states.append(
                RowState(
                    sampling=p.sampling,
                    gen=torch.Generator().manual_seed(seed),
                    seen=torch.zeros(V, dtype=torch.bool, device=self.device),
                    generated=0,
                    h=last[0],
                    c0=last.new_zeros((), dtype=torch.long),
                    trailing=p.emb.trailing,
                    tts_pad=p.emb.tts_pad,
                    limit=limit,
                    fixed=r.prompt.fixed_frames is not None,
                )
            )
        c0 = self._sample_c0(logits, states, self._uniforms(states)[:, 15])
        for b, (r, s) in enumerate(zip(rows, states, strict=True)):  # commit: nothing below raises
            next_uniforms(s)
            s.h, s.c0, s.generated = last[b], c0[b], 1
            s.seen[c0[b]] = True
            r.state, r.kv_len, r.frames_emitted = s, lengths[b], 0
            if r.slot >= 0:
                self.bind_codec_slot(r.slot, self.codec_binding(r.prompt))
        return [StepOutput(frame=None, done=False) for _ in rows]

    @torch.inference_mode()
    def decode(self, rows: list[Row]) -> list[StepOutput]:
        if not rows:
            return []
        states: list[RowState] = [r.state for r in rows]
        dev = self.device
        u = self._uniforms(states)
        h = torch.stack([s.h for s in states])
        c0 = torch.stack([s.c0 for s in states])
        c0_emb = self.talker.codec(c0)
        sub = BatchSampling.sub([s.sampling for s in states], dev)
        codes = self.talker.code_predictor.generate(h, c0_emb, lambda g, lg: select(lg.float(), sub, u[:, g]))
        frames = torch.cat([c0[:, None], codes], dim=1).cpu().numpy().astype(np.int64)
        steps = [s.generated - 1 for s in states]  # decode step index = trailing-text index
        text = torch.stack(
            [
                s.trailing[t] if t < s.trailing.shape[0] else s.tts_pad
                for s, t in zip(states, steps, strict=True)
            ]
        )
        x = (self.talker.code_predictor.embed_frame_sum(c0_emb, codes) + text)[:, None]
        pb = self._paged(rows, [r.kv_len for r in rows], [1] * len(rows))
        hid = self.talker.hidden_states(x.to(self.dtype), pb, self.k_pool, self.v_pool)[:, 0]
        nxt = self._sample_c0(self.talker.codec_head(hid), states, u[:, 15])
        eos = self.cfg.talker.codec_eos_id
        nxt_list = nxt.tolist()
        out = []
        # Commit: no row's state changed above (the KV position each row wrote, its kv_len, is written
        # again by a re-run), and nothing below raises.
        for b, (r, s) in enumerate(zip(rows, states, strict=True)):
            next_uniforms(s)
            s.h, s.c0, s.generated = hid[b], nxt[b], s.generated + 1
            s.seen[nxt[b]] = True
            r.kv_len += 1
            r.frames_emitted += 1
            done = r.frames_emitted >= s.limit or (not s.fixed and nxt_list[b] == eos)
            out.append(StepOutput(frame=frames[b], done=done))
        return out

    def codec_binding(self, prompt: Prompt) -> np.ndarray | None:
        """A voice-clone (ICL) request's reference codes [frames, codebooks] int64: its first chunk decodes
        after them (see `codec`); None for every other request."""
        ref = prompt.data.emb.ref_codes
        return None if ref is None else np.asarray(ref, dtype=np.int64)

    def bind_codec_slot(self, slot: int, binding: np.ndarray | None) -> None:
        if binding is None:
            self.slot_refs.pop(slot, None)
            return
        ref = np.asarray(binding, dtype=np.int64)
        if ref.ndim != 2 or ref.shape[1] != self.spec.codebooks:
            raise ValueError(f"reference codes for codec slot {slot} must be [frames, "
                             f"{self.spec.codebooks}], got shape {ref.shape}")
        self.slot_refs[slot] = ref

    def codec(self, items: list[CodecItem]) -> list[np.ndarray]:
        """Chunk decode through the slot table. A voice-clone (ICL) request's first chunk is decoded
        after its reference codes, as the reference decodes `ref_code ++ codes`, and the reference part
        of the audio is dropped."""
        cut: dict[int, int] = {}
        send = []
        for it in items:
            ref = self.slot_refs.get(it.slot) if it.first else None
            if ref is not None:
                cut[it.slot] = ref.shape[0] * SAMPLES_PER_FRAME
                it = CodecItem(
                    slot=it.slot, codes=np.concatenate([ref, np.asarray(it.codes)]), first=True, last=it.last
                )
            send.append(it)
        wavs = self.codec_model.decode_chunks(send)
        return [w[cut.get(it.slot, 0) :] if it.first else w for it, w in zip(items, wavs, strict=True)]

    def release(self, row: Row) -> None:
        if row.slot >= 0:
            self.slot_refs.pop(row.slot, None)
        row.state = None

    # --- diagnostics (parity tests) ------------------------------------------------------------------
    @torch.inference_mode()
    def text_embeds(self, ids: list[int]) -> torch.Tensor:
        return self.talker.text(torch.tensor([ids], device=self.device))[0]


@dataclass
class PreparedPrompt:
    emb: PromptEmbeds
    sampling: RowSampling
    seed: int | None


def load_weights_meta(
    weights: Qwen3TTSWeights, root: Path, device: str, dtype: torch.dtype
) -> None:
    """Materialise a meta-built module from the checkpoint, each tensor read straight into its parameter
    (strict keys and shapes, checked before anything is read; speaker_encoder.* is the audio side's)."""
    fill_module(weights, checkpoint_entries(root), root, device, dtype, ignore_prefixes=("speaker_encoder.",))
