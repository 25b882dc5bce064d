"""Higgs Audio (transformers `HiggsAudioV2ForConditionalGeneration`) as a voxcli model program.

A decoder-only backbone over text ids and audio frames (8 codebooks summed into one embedding) on the engine's
paged KV pool; one delayed position of the 8 codebooks per decode step (delay.py undoes the delay, so the
engine receives aligned frames: the first after 9 steps, then one per step; the drain after EOS runs here);
the DAC-based audio tokenizer decodes chunks exactly through codec slots (codec.py: 9.85 frames of
look-ahead).

Sampling follows `generate`: the delay processor's forced BOS/EOS first, then (sampling only) temperature,
top-k, top-p, a draw from the row's own generator; repetition-aware resampling (`ras_win_len`,
`ras_win_max_num_repeat` in generation_config.json) on sampled rows. `--greedy` is a plain argmax per
codebook: equal to `generate(do_sample=False)` for a checkpoint without RAS settings (with them the reference
still draws a random replacement for repeated codes, which no deterministic path can reproduce).
"""

from __future__ import annotations

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
)
from ..checkpoint import (
    check_state_dict,
    checkpoint_entries,
    fill_module,
    read_entries,
    read_json,
    read_state_dict,
    resolve,
)
from ..codecs.dac.config import decoder_lookahead_frames
from ..device_memory import pool_zeros
from ..dtypes import dtype_name
from ..layers import PagedBatch
from ..sampling import draw, request_generator, top_k_filter, top_p_filter
from .codec import HiggsCodec, HiggsCodecConfig, resolve_tokenizer
from .config import GenerationDefaults, HiggsConfig, parse_v2
from .delay import DelayTracker
from .encoder import HiggsEncoder
from .layers import HiggsWeights
from .layouts import V3_CODEC_PREFIX, boson_state, parse_boson, parse_v3, v3_state, with_delay_ids
from .prompt import AUDIO_DELAY, SCENE, TextTokenizer, V3Tokenizer, clone_prompt, prompt_ids, token_id
from .spec import DEFAULT_CHUNKS, DTYPE_POLICY, higgs_spec, local_codec_config  # noqa: F401 - DEFAULT_CHUNKS re-exported

DEFAULT_MAX_NEW = 1000  # the documented example's max_new_tokens, when generation_config.json sets none
NEG_INF = float("-inf")


@dataclass(frozen=True)
class RowSampling:
    greedy: bool
    temperature: float
    top_k: int
    top_p: float
    ras_window: int | None
    ras_repeats: int | None


@dataclass
class PreparedHiggs:
    ids: list[int]
    sampling: RowSampling
    seed: int | None
    # Voice clone: the clip's delayed rows [n, C]; they replace the n audio placeholders of `ids`.
    audio_rows: np.ndarray | None = None


@dataclass
class HiggsState:
    tracker: DelayTracker
    sampling: RowSampling
    gen: torch.Generator
    fixed: bool


class HiggsProgram(ModelProgram):
    def __init__(
        self,
        root: Path,
        cfg: HiggsConfig,
        gen: GenerationDefaults,
        weights: HiggsWeights,
        tok: TextTokenizer | V3Tokenizer,
        device: torch.device,
        dtype: torch.dtype,
        name: str,
        rates: tuple[int, int] = (24000, 960),
        lookahead_frames: float = 0.0,  # ModelSpec.codec_lookahead_frames (`load` derives it)
    ) -> None:
        self.root, self.cfg, self.gen, self.weights, self.tok = root, cfg, gen, weights, tok
        self.device, self.dtype = device, dtype
        self.spec = higgs_spec(name, cfg, rates, lookahead_frames, clones=not isinstance(tok, V3Tokenizer))
        self.k_pool: torch.Tensor | None = None
        self.v_pool: torch.Tensor | None = None
        self.page_size = 0
        self._codec = None
        self._encoder: HiggsEncoder | None = None  # the tokenizer's encoder, loaded on the first clone

    # --- loading ---------------------------------------------------------------------------------
    @classmethod
    def load(cls, source: str, device: str = "cpu", dtype: str = "float32") -> HiggsProgram:
        """A Higgs checkpoint in any of its three layouts (layouts.py), by config.json `model_type`."""
        lm_dtype = DTYPE_POLICY.torch_dtype("lm", dtype)
        root = resolve(source)
        where = str(root / "config.json")
        d = read_json(root / "config.json")
        kind = d.get("model_type")
        codec = None
        sd: dict | None = None  # tensors (the boson layout, whose embedding/head are split in the file)
        if kind == "higgs_audio_v2":
            cfg = parse_v2(d, where)
            entries = checkpoint_entries(root)
        elif kind == "higgs_audio":
            # the original config names no audio-delay token: the tokenizer's own id for it (as the processor)
            cfg = parse_boson(d, where, audio_delay_token_id=token_id(root, AUDIO_DELAY))
            sd = boson_state(read_state_dict(root))
        elif kind == "higgs_multimodal_qwen3":
            entries = checkpoint_entries(root)
            cfg = parse_v3(d, {k: e.shape for k, e in entries.items()}, where)
            # the bundled decoder (~0.1 B parameters) is read on its own; the backbone is filled in place
            codec = HiggsCodec.from_state(
                read_entries({k: e for k, e in entries.items() if k.startswith(V3_CODEC_PREFIX)}, root),
                V3_CODEC_PREFIX,
                root,
                device=device,
                dtype=DTYPE_POLICY.name("codec", dtype),
            )
            entries = v3_state(entries, cfg)  # a renaming: TensorEntry values pass through
        else:
            raise CheckpointError(
                f"{where}: model_type {kind!r} is not a Higgs Audio checkpoint (one of "
                "higgs_audio_v2, higgs_audio, higgs_multimodal_qwen3)"
            )
        if cfg.variant == "v3":
            tok: TextTokenizer | V3Tokenizer = V3Tokenizer(root)
            cfg = with_delay_ids(cfg, tok.audio)
        else:
            tok = TextTokenizer(root, cfg)
        gen = GenerationDefaults.read(root / "generation_config.json")
        with torch.device("meta"):
            weights = HiggsWeights(cfg).to(lm_dtype)  # materialised in the dtype, not fp32 first
        unused = ("text_lm_head.", "audio_decoder_proj.")
        if sd is None:
            # each tensor read straight from the file into its parameter: peak RSS ~ the weights once
            fill_module(weights, entries, root, device, lm_dtype, ignore_prefixes=unused)
        else:
            check_state_dict(weights, sd, root, ignore_prefixes=unused)
            own = weights.state_dict()
            # assign: the file's tensors become the parameters (no second copy in memory)
            weights.load_state_dict(
                {k: v.to(device=device, dtype=lm_dtype) for k, v in sd.items() if k in own},
                strict=True,
                assign=True,
            )
            del sd
        name = source if not Path(source).exists() else root.name
        program = cls(
            root,
            cfg,
            gen,
            weights.eval(),
            tok,
            torch.device(device),
            lm_dtype,
            name,
            rates=(codec.sample_rate, codec.hop_length) if codec is not None else _codec_rates(root),
            lookahead_frames=_codec_lookahead_frames(root, codec),
        )
        program._codec = codec
        return program

    @property
    def codec_model(self):
        if self._codec is None:
            dtype = DTYPE_POLICY.name("codec", dtype_name(self.dtype))
            self._codec = HiggsCodec.load(resolve_tokenizer(self.root), device=str(self.device), dtype=dtype)
        return self._codec

    # --- host: prompts ---------------------------------------------------------------------------
    def resolve_sampling(self, req: SynthesisRequest) -> RowSampling:
        p, g = req.sampling, self.gen
        if p.repetition_penalty not in (None, 1.0):
            raise InputError(
                "Higgs Audio has no repetition penalty (it resamples repeats itself); leave "
                "repetition_penalty unset"
            )
        rs = RowSampling(
            greedy=p.greedy or not g.do_sample,
            temperature=g.temperature if p.temperature is None else p.temperature,
            top_k=(g.top_k or 0) if p.top_k is None else p.top_k,
            top_p=g.top_p if p.top_p is None else p.top_p,
            ras_window=g.ras_win_len,
            ras_repeats=g.ras_win_max_num_repeat,
        )
        if rs.temperature <= 0:
            raise InputError(
                f"sampling temperature must be > 0 (use greedy for deterministic output), got "
                f"{rs.temperature}"
            )
        if not 0 < rs.top_p <= 1:
            raise InputError(f"sampling top_p must be in (0, 1], got {rs.top_p}")
        if rs.top_k < 0:
            raise InputError(f"sampling top_k must be >= 0 (0 = off), got {rs.top_k}")
        return rs

    def check(self, request: SynthesisRequest, has_codes: bool = False) -> None:
        if not request.text or not request.text.strip():
            raise InputError("the text is empty")
        if request.voice is not None:
            raise InputError(
                f"model {self.spec.name} has no named voices; drop the voice (describe the speaker "
                "with --instructions, which becomes the scene description)"
            )
        clone = request.ref_audio is not None or has_codes
        if clone and isinstance(self.tok, V3Tokenizer):
            raise InputError(
                "voice clone with Higgs Audio v3 is not implemented (its bundled audio tokenizer has no "
                "encoder here); drop --ref-audio / --ref-text"
            )
        if request.ref_text and not clone:
            raise InputError("--ref-text needs the reference clip it transcribes (--ref-audio)")
        if clone and not (request.ref_text and request.ref_text.strip()):
            raise InputError("voice clone needs --ref-text: the transcript of the reference clip")
        if request.ref_audio is not None:
            wav = np.asarray(request.ref_audio)
            if wav.ndim != 1:
                raise InputError(f"the reference audio must be mono (one channel), got shape {wav.shape}")
            if wav.size == 0:
                raise InputError("the reference audio is empty; give a few seconds of speech")
            if request.ref_sample_rate is None or request.ref_sample_rate <= 0:
                raise InputError("the reference audio needs its sample rate (ref_sample_rate)")
        if request.cfg_scale is not None and request.cfg_scale != 1:
            raise InputError(
                f"model {self.spec.name} has no classifier-free guidance: leave cfg_scale unset "
                f"or 1, got {request.cfg_scale}"
            )
        check_numbers(request)
        self.options_of(request)  # the one validator: Higgs takes no options
        if request.language not in (None, "auto"):
            raise InputError(
                f"Higgs Audio picks the language from the text; leave language unset or auto, got "
                f"{request.language!r}"
            )
        self.resolve_sampling(request)

    def reference_codes(self, wav: np.ndarray, sample_rate: int) -> np.ndarray:
        """The clip's audio-tokenizer codes [T, C] (encoder.py; other sample rates are resampled first)."""
        if self._encoder is None:
            self._encoder = HiggsEncoder.load(resolve_tokenizer(self.root), device=str(self.device))
        return self._encoder.encode(np.asarray(wav, dtype=np.float32), int(sample_rate))

    def prepare(self, request: SynthesisRequest, *, ref_codes: np.ndarray | None = None) -> Prompt:
        """Voice clone: `request.ref_audio` (+ `ref_text`, its transcript) is encoded by the audio
        tokenizer's encoder, as the reference processor does; `ref_codes` [T, C] injects such codes directly
        (tests)."""
        self.check(request, has_codes=ref_codes is not None)
        rows = None
        if ref_codes is None and request.ref_audio is not None:
            ref_codes = self.reference_codes(request.ref_audio, request.ref_sample_rate or 0)
        if ref_codes is not None:
            codes = np.asarray(ref_codes)
            C, top = self.cfg.num_codebooks, self.cfg.codes_per_book
            if (
                codes.ndim != 2
                or codes.shape[1] != C
                or codes.shape[0] < 1
                or codes.min() < 0
                or codes.max() >= top
            ):
                raise InputError(
                    f"reference codes must be [frames >= 1, {C}] in [0, {top}), got {codes.shape}"
                )
            inst = request.instructions
            scene = inst.strip() if inst and inst.strip() else SCENE
            ids, rows = clone_prompt(self.tok, request.text, request.ref_text or "", codes, self.cfg, scene)
        elif isinstance(self.tok, V3Tokenizer):
            if request.instructions:
                raise InputError("Higgs Audio v3 takes no instructions (its prompt has no scene description)")
            ids = self.tok.prompt(request.text)
        else:
            inst = request.instructions
            scene = inst.strip() if inst and inst.strip() else SCENE
            ids = prompt_ids(self.tok, request.text, scene=scene)
        C = self.cfg.num_codebooks
        room = self.cfg.max_position_embeddings - len(ids) - C - 1
        default = min((self.gen.max_new_tokens or DEFAULT_MAX_NEW) - C, room)
        if room < 1:
            raise InputError(
                f"the prompt is {len(ids)} tokens long, which leaves no room in the model's context "
                f"of {self.cfg.max_position_embeddings}; shorten the text"
            )
        max_frames = request.max_frames if request.max_frames is not None else default
        if max_frames < 1:
            raise InputError(f"max_frames must be >= 1, got {max_frames}")
        if request.fixed_frames is not None and request.fixed_frames < 1:
            raise InputError(f"fixed_frames must be >= 1, got {request.fixed_frames}")
        data = PreparedHiggs(
            ids=ids, sampling=self.resolve_sampling(request), seed=request.seed, audio_rows=rows
        )
        return Prompt(length=len(ids), data=data, max_frames=max_frames, fixed_frames=request.fixed_frames)

    def kv_tokens(self, prompt: Prompt) -> int:
        frames = prompt.max_frames if prompt.fixed_frames is None else prompt.fixed_frames
        return prompt.length + frames + self.cfg.num_codebooks + 1

    # --- device resources ------------------------------------------------------------------------
    def init_kv(self, num_pages: int, page_size: int) -> None:
        c = self.cfg
        shape = (c.num_hidden_layers, num_pages, page_size, c.num_key_value_heads, c.head_dim)
        # calloc'd on a CPU (device_memory.py): a page is resident only once written
        self.k_pool = pool_zeros(shape, self.dtype, self.device)
        self.v_pool = pool_zeros(shape, self.dtype, self.device)
        self.page_size = page_size

    def memory_needs(self) -> MemoryNeeds:
        from .memory import memory_needs

        if self._codec is not None:
            codec_cfg = self._codec.hnet.cfg
        else:
            codec_cfg = HiggsCodecConfig.read(resolve_tokenizer(self.root) / "config.json")
        return memory_needs(self.cfg, codec_cfg, self.dtype, codec_loaded=self._codec is not None)

    def init_codec_slots(self, num_slots: int) -> None:
        self.codec_model.init_slots(num_slots)

    # --- stages ----------------------------------------------------------------------------------
    def _paged(self, rows: list[Row], starts: list[int], counts: list[int]) -> PagedBatch:
        if self.k_pool is None:
            raise RuntimeError("the KV pool is not allocated: call init_kv(num_pages, page_size) first")
        return PagedBatch.for_rows(rows, starts, counts, self.page_size, self.device)

    def _step(self, rows: list[Row], logits: torch.Tensor) -> list[StepOutput]:
        """logits [R, C, V] of each row's newest position -> the step's tokens through the delay pattern."""
        states: list[HiggsState] = [r.state for r in rows]
        C, V = self.cfg.num_codebooks, self.cfg.codebook_size
        bos_id, eos_id = self.cfg.audio_stream_bos_id, self.cfg.audio_stream_eos_id
        raw = logits.float()
        scores = raw.clone()
        vocab = torch.arange(V, device=raw.device)
        masks = [st.tracker.forced() for st in states]
        fb = torch.from_numpy(np.stack([m[0] for m in masks])).to(raw.device)  # [R, C] force stream BOS
        fe = torch.from_numpy(np.stack([m[1] for m in masks])).to(raw.device)  # [R, C] force stream EOS
        fixed = torch.tensor([st.fixed for st in states], device=raw.device)
        # bench rows never end on their own: no natural EOS where it is not forced
        scores[..., eos_id] = scores[..., eos_id].masked_fill(fixed[:, None] & ~fe, NEG_INF)
        scores = scores.masked_fill(fb[..., None] & (vocab != bos_id), NEG_INF)
        scores = scores.masked_fill(fe[..., None] & (vocab != eos_id), NEG_INF)
        greedy = torch.tensor([st.sampling.greedy for st in states], device=raw.device)
        if bool(greedy.all()):
            tokens = scores.argmax(-1).cpu().numpy()
        else:
            temp = torch.tensor(
                [1.0 if st.sampling.greedy else st.sampling.temperature for st in states], device=raw.device
            )
            scores = scores / temp.view(-1, 1, 1)
            k = torch.tensor(
                [0 if st.sampling.greedy else st.sampling.top_k for st in states], device=raw.device
            )
            scores = top_k_filter(scores, k)
            tp = torch.tensor(
                [1.0 if st.sampling.greedy else st.sampling.top_p for st in states], device=raw.device
            )
            scores = top_p_filter(scores, tp)
            u = torch.stack([torch.rand(C, generator=st.gen, dtype=torch.float64) for st in states]).to(
                raw.device
            )
            tokens = draw(scores, greedy, u).cpu().numpy()
            tokens = self._ras(states, raw, tokens)
        out = []
        for r, st, tok in zip(rows, states, tokens, strict=True):
            frames = st.tracker.record(tok)
            frame = frames[0] if frames else None
            if frame is not None:
                r.frames_emitted += 1
            out.append(StepOutput(frame=frame, done=st.tracker.done))
        return out

    def _ras(self, states: list[HiggsState], raw: torch.Tensor, tokens: np.ndarray) -> np.ndarray:
        """Repetition-aware sampling on sampled rows: a codebook whose token already appears ras_repeats times
        in the last ras_window frames (stream BOS/EOS not counted) is redrawn from softmax(raw logits)."""
        bos_id, eos_id = self.cfg.audio_stream_bos_id, self.cfg.audio_stream_eos_id
        for b, st in enumerate(states):
            s = st.sampling
            if s.greedy or not s.ras_window or not s.ras_repeats:
                continue
            win = st.tracker.window(s.ras_window)
            if win.shape[0] == 0:
                continue
            counted = (win == tokens[b][None]) & (win != bos_id) & (win != eos_id)
            redo = counted.sum(0) >= s.ras_repeats
            if not redo.any():
                continue
            u = torch.rand(int(redo.sum()), generator=st.gen, dtype=torch.float64).to(raw.device)
            probs = raw[b, torch.from_numpy(redo).to(raw.device)].double().softmax(-1)
            cdf = probs.cumsum(-1)
            picked = (cdf <= (u[:, None] * cdf[:, -1:])).sum(-1).clamp(max=probs.shape[-1] - 1)
            tokens[b, redo] = picked.cpu().numpy()
        return tokens

    @torch.inference_mode()
    def prefill(self, rows: list[Row]) -> list[StepOutput]:
        if not rows:
            return []
        c = self.cfg
        for r in rows:
            p: PreparedHiggs = r.prompt.data
            fixed = r.prompt.fixed_frames is not None
            r.state = HiggsState(
                tracker=DelayTracker(
                    p.ids,
                    c.num_codebooks,
                    c.audio_stream_bos_id,
                    c.audio_stream_eos_id,
                    c.audio_token_id,
                    c.audio_bos_token_id,
                    c.audio_delay_token_id,
                    c.eos_token_id,
                    r.prompt.fixed_frames if fixed else r.prompt.max_frames,
                    history=p.audio_rows,
                ),
                sampling=p.sampling,
                gen=request_generator(p.seed),
                fixed=fixed,
            )
            r.frames_emitted = 0
        lengths = [len(r.prompt.data.ids) for r in rows]
        ids = torch.zeros(len(rows), max(lengths), dtype=torch.long)
        for b, r in enumerate(rows):
            ids[b, : lengths[b]] = torch.tensor(r.prompt.data.ids)
        x = self.weights.embed_text(ids.to(self.device))
        audio = None  # voice-clone rows: their clip's positions go through the audio FFN (DualFFN)
        for b, r in enumerate(rows):
            clip = r.prompt.data.audio_rows
            if clip is None:
                continue
            if audio is None:
                audio = torch.zeros(ids.shape, dtype=torch.bool, device=self.device)
            at = (ids[b] == c.audio_token_id) | (ids[b] == c.audio_delay_token_id)
            at[lengths[b] :] = False
            audio[b] = at.to(self.device)
            x[b, audio[b]] = self.weights.embed_audio(torch.from_numpy(clip).to(self.device)).to(x.dtype)
        pb = self._paged(rows, [0] * len(rows), lengths)
        hid = self.weights.hidden_states(x, pb, self.k_pool, self.v_pool, audio=audio)
        last = hid[torch.arange(len(rows), device=self.device), torch.tensor(lengths, device=self.device) - 1]
        for r, n in zip(rows, lengths, strict=True):
            r.kv_len = n
        return self._step(rows, self.weights.logits(last))

    @torch.inference_mode()
    def decode(self, rows: list[Row]) -> list[StepOutput]:
        if not rows:
            return []
        frames = torch.tensor(np.stack([r.state.tracker.last_input() for r in rows]), device=self.device)
        x = self.weights.embed_audio(frames)[:, None]
        pb = self._paged(rows, [r.kv_len for r in rows], [1] * len(rows))
        audio = torch.ones(len(rows), 1, dtype=torch.bool, device=self.device)
        hid = self.weights.hidden_states(x, pb, self.k_pool, self.v_pool, audio=audio)[:, 0]
        for r in rows:
            r.kv_len += 1
        return self._step(rows, self.weights.logits(hid))

    def codec(self, items: list[CodecItem]) -> list[np.ndarray]:
        return self.codec_model.decode(items)

    def release(self, row: Row) -> None:
        if row.slot >= 0 and self._codec is not None:
            self._codec.release_slot(row.slot)
        row.state = None


def _codec_lookahead_frames(root: Path, codec: HiggsCodec | None) -> float:
    """Frames of audio the tokenizer's decoder holds back (ModelSpec.codec_lookahead_frames): its right
    context over the upsampling ratios (the same layers as Dia's DAC decoder), from the loaded codec, else
    the checkpoint's audio tokenizer config (spec.local_codec_config)."""
    cfg = codec.hnet.cfg if codec is not None else local_codec_config(root)
    ratios = cfg.upsampling_ratios
    return decoder_lookahead_frames(ratios)


def _codec_rates(root: Path) -> tuple[int, int]:
    """Sample rate and hop of the checkpoint's audio tokenizer (spec.local_codec_config)."""
    c = local_codec_config(root)
    return c.sampling_rate, c.hop_length
