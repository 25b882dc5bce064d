"""CSM-1B (transformers `CsmForConditionalGeneration`) as a voxcli model program.

Per step and row: the backbone (on the engine's paged KV pool) reads one position, a prompt in prefill or
the previous frame's K codebooks summed in decode, and its last normed hidden state gives codebook 0
(`lm_head`); the depth decoder then runs inside the same step (as Qwen3-TTS's code predictor: a fresh
dense cache per frame, all rows together) from that hidden state and codebook 0 to codebooks 1..K-1. So
every step emits one frame. A frame whose codebooks 0..K-2 all hold `codebook_eos_token_id` ends the
utterance, as `generate` stops; it is played only when its last codebook is not eos too (`generate`'s
audio cuts at the first all-eos frame). Mimi (models/codecs/mimi) decodes chunks in the codec lanes, its
streaming state in codec slots.

Re-runnable stages (models/base.py): prefill rebuilds each row's state from its prompt and assigns it at
the end; decode computes the whole step first, then commits every row in a loop that cannot raise; the
rows' generators are restored if a stage raises part-way (their draws are the only host state it
consumes). KV writes go to each row's own pages at positions >= kv_len (a re-run writes them again).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..audio.clip import clip_at
from ..base import (
    CodecItem,
    InputError,
    MemoryNeeds,
    ModelProgram,
    Prompt,
    Row,
    StepOutput,
    SynthesisRequest,
)
from ..checkpoint import fill_module, read_json, resolve
from ..codecs.mimi.codec import MimiCodec, load_codec
from ..codecs.mimi.layouts import transformers_layout
from ..device_memory import pool_zeros
from ..layers import PagedBatch
from ..sampling import request_generator
from .checkpoint import csm_entries
from .config import CsmConfig, GenerationDefaults, parse_config
from .layers import CsmWeights
from .options import OPTIONS
from .prompt import TextTokenizer
from .sampling import RowSampling, Sampling, pick
from .spec import DEFAULT_VOICE, DTYPE_POLICY, model_spec

CODEC_PREFIX = "codec_model."
TIED_KEY = "backbone_model.embed_tokens.embed_audio_tokens.weight"
DEFAULT_MAX_FRAMES = 1500  # 2 minutes at 12.5 Hz when generation_config.json names no length


@dataclass
class PreparedCsm:
    ids: list[int]
    context: np.ndarray | None  # [n, K] frames of the <|AUDIO|> positions (a voice clone's clip)
    sampling: RowSampling
    seed: int | None


@dataclass
class CsmState:
    gen: torch.Generator
    sampling: RowSampling
    last: np.ndarray  # the frame the next decode step reads
    fixed: bool
    limit: int  # frames this request may produce


class CsmProgram(ModelProgram):
    option_schema = OPTIONS  # models/csm/options.py

    def __init__(
        self,
        root: Path,
        cfg: CsmConfig,
        gen: GenerationDefaults,
        weights: CsmWeights,
        tok: TextTokenizer,
        codec: MimiCodec,
        device: torch.device,
        dtype: torch.dtype,
        name: str,
    ) -> None:
        self.root, self.cfg, self.gen, self.weights, self.tok = root, cfg, gen, weights, tok
        self.codec_model = codec
        self.device, self.dtype = device, dtype
        self.spec = model_spec(cfg, name)
        self.k_pool: torch.Tensor | None = None
        self.v_pool: torch.Tensor | None = None
        self.page_size = 0

    # --- loading ---------------------------------------------------------------------------------
    @classmethod
    def load(
        cls, source: str, device: str = "cpu", dtype: str = "float32",
        part_dtypes: Mapping[str, str] | None = None,
    ) -> CsmProgram:
        """`part_dtypes`: a part's dtype instead of its DTYPE_POLICY rule (the exactness checks run the
        codec in float64)."""
        lm_dtype = DTYPE_POLICY.torch_dtype("lm", dtype)
        root = resolve(source)
        cfg = parse_config(read_json(root / "config.json"), str(root / "config.json"))
        entries = csm_entries(root)
        tok = TextTokenizer(root)
        gen = GenerationDefaults.read(root / "generation_config.json")
        with torch.device("meta"):
            weights = CsmWeights(cfg).to(lm_dtype)
        ignore: tuple[str, ...] = (
            (CODEC_PREFIX, TIED_KEY) if cfg.tie_codebooks_embeddings else (CODEC_PREFIX,)
        )
        own = {k: e for k, e in entries.items() if not k.startswith(CODEC_PREFIX)}
        fill_module(weights, own, root, device, lm_dtype, ignore_prefixes=ignore)
        codec = load_codec(
            cfg.codec,
            entries,
            transformers_layout(CODEC_PREFIX),
            str(root),
            device,
            DTYPE_POLICY.torch_dtype("codec", dtype, part_dtypes),
            cfg.num_codebooks,
        )
        name = source if not Path(source).exists() else root.name
        return cls(root, cfg, gen, weights.eval(), tok, codec, torch.device(device), lm_dtype, name)

    # --- host: requests --------------------------------------------------------------------------
    def resolve_sampling(self, req: SynthesisRequest) -> RowSampling:
        p, g = req.sampling, self.gen
        o = self.options_of(req)
        if p.repetition_penalty not in (None, 1.0):
            raise InputError("CSM has no repetition penalty; leave repetition_penalty unset")
        greedy = p.greedy or not g.do_sample
        depth_greedy = o["depth_greedy"]
        if depth_greedy is None:
            depth_greedy = p.greedy or not g.depth_do_sample  # "greedy" asks for the deterministic path
        rs = RowSampling(
            backbone=Sampling(
                greedy,
                g.temperature if p.temperature is None else p.temperature,
                g.top_k if p.top_k is None else p.top_k,
                g.top_p if p.top_p is None else p.top_p,
            ),
            depth=Sampling(
                depth_greedy,
                g.depth_temperature if o["depth_temperature"] is None else o["depth_temperature"],
                g.depth_top_k if o["depth_top_k"] is None else o["depth_top_k"],
                g.depth_top_p if o["depth_top_p"] is None else o["depth_top_p"],
            ),
        )
        for what, s in (("temperature", rs.backbone), ("depth_temperature", rs.depth)):
            if s.temperature <= 0:
                raise InputError(
                    f"sampling {what} must be > 0 (use greedy for deterministic output), got {s.temperature}"
                )
        return rs

    def check(self, request: SynthesisRequest, has_codes: bool = False) -> None:
        super().check(request)  # numbers, voice among 0..9, no cfg, the options
        if not request.text or not request.text.strip():
            raise InputError("the text is empty")
        if request.language not in (None, "auto"):
            raise InputError(
                f"CSM picks the language from the text; leave language unset or auto, got "
                f"{request.language!r}"
            )
        if request.instructions:
            raise InputError(
                "CSM takes no instructions; its voice is a speaker (--voice 0..9) or a reference "
                "clip (--ref-audio with --ref-text)"
            )
        clone = request.ref_audio is not None or has_codes
        if request.ref_text and not clone:
            raise InputError("--ref-text needs the reference clip it transcribes (--ref-audio)")
        if clone and not (request.ref_text and request.ref_text.strip()):
            raise InputError("voice clone needs --ref-text: the transcript of the reference clip")
        self.resolve_sampling(request)

    def reference_codes(self, wav: np.ndarray, sample_rate: int) -> np.ndarray:
        """A clip's Mimi codes [T, K], as the processor encodes a context turn's audio (MimiModel.encode)."""
        return self.codec_model.encode(wav, sample_rate)

    def prepare(self, request: SynthesisRequest, *, ref_codes: np.ndarray | None = None) -> Prompt:
        """Text (+ a voice clone's context turn: `ref_audio` with `ref_text`, or its codes `ref_codes`)."""
        self.check(request, has_codes=ref_codes is not None)
        c = self.cfg
        speaker = (DEFAULT_VOICE if request.voice is None
                   else self.spec.resolve_voice(request.voice, request.voice_paths).name)
        if ref_codes is None and request.ref_audio is not None:
            # a clip at another rate is resampled to Mimi's (models/audio/clip.py)
            rate = c.codec.sampling_rate
            clip = clip_at(request.ref_audio, int(request.ref_sample_rate or 0), rate)
            ref_codes = self.reference_codes(clip, rate)
        ids: list[int] = []
        context = None
        if ref_codes is not None:
            context = np.asarray(ref_codes, dtype=np.int64)
            K, top = c.num_codebooks, c.codec.codebook_size
            if (
                context.ndim != 2
                or context.shape[1] != K
                or context.shape[0] < 1
                or context.min() < 0
                or context.max() >= top
            ):
                raise InputError(
                    f"reference codes must be [frames >= 1, {K}] in [0, {top}), got {context.shape}"
                )
            ids += self.tok.segment(speaker, (request.ref_text or "").strip())
            ids += [c.audio_token_id] * context.shape[0] + [c.audio_eos_token_id]
        ids += self.tok.segment(speaker, request.text)
        room = c.backbone.max_position_embeddings - len(ids)
        if room < 1:
            raise InputError(
                f"the prompt is {len(ids)} tokens long, which leaves no room in the model's "
                f"context of {c.backbone.max_position_embeddings}; shorten the text or the clip"
            )
        default = min(self.gen.max_new_tokens or DEFAULT_MAX_FRAMES, room)
        max_frames = request.max_frames if request.max_frames is not None else default
        if max_frames < 1:
            raise InputError(f"max_frames must be >= 1, got {max_frames}")
        data = PreparedCsm(
            ids=ids, context=context, sampling=self.resolve_sampling(request), seed=request.seed
        )
        return Prompt(length=len(ids), data=data, max_frames=max_frames, fixed_frames=request.fixed_frames)

    # --- device resources ------------------------------------------------------------------------
    def init_kv(self, num_pages: int, page_size: int) -> None:
        b = self.cfg.backbone
        shape = (b.num_layers, num_pages, page_size, b.num_kv_heads, b.head_dim)
        # calloc'd on a CPU (device_memory.py): a page is resident only once written
        self.k_pool = pool_zeros(shape, self.dtype, self.device)
        self.v_pool = pool_zeros(shape, self.dtype, self.device)
        self.page_size = page_size

    def init_codec_slots(self, num_slots: int) -> None:
        self.codec_model.init_slots(num_slots)

    def memory_needs(self) -> MemoryNeeds:
        from .memory import memory_needs

        return memory_needs(self.cfg, self.dtype, self.codec_model.slot_bytes())

    # --- stages ----------------------------------------------------------------------------------
    def _paged(self, rows: list[Row], starts: list[int], counts: list[int]) -> PagedBatch:
        if self.k_pool is None:
            raise RuntimeError("the KV pool is not allocated: call init_kv(num_pages, page_size) first")
        return PagedBatch.for_rows(rows, starts, counts, self.page_size, self.device)

    def _frames(self, hidden: torch.Tensor, states: list[CsmState]) -> np.ndarray:
        """The backbone's last hidden [R, H] -> each row's frame [R, K] (codebook 0, then the depth
        decoder)."""
        gens = [s.gen for s in states]
        codable = self.cfg.codec.codebook_size
        w = self.weights
        c0 = pick(w.lm_head(hidden), [s.sampling.backbone for s in states], gens, codable)
        depth = [s.sampling.depth for s in states]
        rest = w.depth_generate(hidden, c0, lambda g, logits: pick(logits, depth, gens, codable))
        return torch.cat([c0[:, None], rest], dim=1).cpu().numpy()

    def _finish(self, rows: list[Row], states: list[CsmState], frames: np.ndarray) -> list[StepOutput]:
        """Commit (cannot raise): each row's frame, its end by the eos rule or its frame limit."""
        eos = self.cfg.codebook_eos_token_id
        out = []
        for r, st, frame in zip(rows, states, frames, strict=True):
            end = not st.fixed and bool((frame[:-1] == eos).all())
            played = not (end and frame[-1] == eos)
            if played:
                r.frames_emitted += 1
            st.last = frame
            r.state = st
            out.append(StepOutput(frame=frame if played else None, done=end or r.frames_emitted >= st.limit))
        return out

    def _guarded(self, states: list[CsmState], step):
        """Run `step`; if it raises, put every row's generator back where it was (re-runnable stages)."""
        saved = [s.gen.get_state() for s in states]
        try:
            return step()
        except BaseException:
            for s, g in zip(states, saved, strict=True):
                s.gen.set_state(g)
            raise

    @torch.inference_mode()
    def prefill(self, rows: list[Row]) -> list[StepOutput]:
        if not rows:
            return []
        c = self.cfg
        states = []
        for r in rows:
            p: PreparedCsm = r.prompt.data
            fixed = r.prompt.fixed_frames is not None
            states.append(
                CsmState(
                    gen=request_generator(p.seed),
                    sampling=p.sampling,
                    last=np.zeros(c.num_codebooks, dtype=np.int64),
                    fixed=fixed,
                    limit=r.prompt.fixed_frames if fixed else r.prompt.max_frames,
                )
            )
        lengths = [len(r.prompt.data.ids) for r in rows]

        def step() -> np.ndarray:
            ids = torch.zeros(len(rows), max(lengths), dtype=torch.long)
            for b, r in enumerate(rows):
                ids[b, : lengths[b]] = torch.tensor(r.prompt.data.ids)
            ids = ids.to(self.device)
            x = self.weights.embed_text_tokens(ids)
            eos_frame = torch.full((c.num_codebooks,), c.codebook_eos_token_id, device=self.device)
            for b, r in enumerate(rows):
                ctx = r.prompt.data.context
                if ctx is None:
                    continue
                audio = ids[b] == c.audio_token_id
                audio[lengths[b] :] = False
                x[b, audio] = self.weights.embed_frames(torch.from_numpy(ctx).to(self.device)).to(x.dtype)
                x[b, ids[b] == c.audio_eos_token_id] = self.weights.embed_frames(eos_frame).to(x.dtype)
            hid = self.weights.hidden_states(
                x, self._paged(rows, [0] * len(rows), lengths), self.k_pool, self.v_pool
            )
            last = hid[
                torch.arange(len(rows), device=self.device), torch.tensor(lengths, device=self.device) - 1
            ]
            return self._frames(last, states)

        frames = self._guarded(states, step)
        for r, n in zip(rows, lengths, strict=True):
            r.kv_len = n
            r.frames_emitted = 0
        return self._finish(rows, states, frames)

    @torch.inference_mode()
    def decode(self, rows: list[Row]) -> list[StepOutput]:
        if not rows:
            return []
        states: list[CsmState] = [r.state for r in rows]

        def step() -> np.ndarray:
            last = torch.from_numpy(np.stack([s.last for s in states])).to(self.device)
            x = self.weights.embed_frames(last)[:, None]
            pb = self._paged(rows, [r.kv_len for r in rows], [1] * len(rows))
            hid = self.weights.hidden_states(x, pb, self.k_pool, self.v_pool)[:, 0]
            return self._frames(hid, states)

        frames = self._guarded(states, step)
        for r in rows:
            r.kv_len += 1
        return self._finish(rows, states, frames)

    def codec(self, items: list[CodecItem]) -> list[np.ndarray]:
        return self.codec_model.decode_chunks(items)

    def release(self, row: Row) -> None:
        row.state = None
