"""Zonos v0.1 (transformer) as a voxcli model program.

* Prompt. One sequence = the prefix conditioning (phoneme tokens of the text, then one token per further
  conditioner: speaker, emotion, fmax, pitch_std, speaking_rate, language_id, in config.json's order), then
  the first delayed code column (all masked). Guidance is always on (the reference refuses w = 1): a request
  is ONE row of width 2, its conditional and unconditional sequences run in the same forward pass, share
  the sampled tokens and hold one page list (conditional pages first). The unconditional prefix keeps the
  text and takes every other conditioner's learned unconditional vector; a request without a speaker takes
  the learned unconditional speaker in its conditional prefix too (the reference's default speaker). The
  speaker is a saved embedding (the voice) or one made from a clip (--ref-audio) by the reference's
  speaker model (speaker_model.py), bfloat16-rounded as `make_speaker_embedding` returns it.
* Decode. One delayed column per step for both sequences: nine summed code embeddings in, nine heads out
  (CFG, EOS for codebook 0 only, the repetition penalty, argmax or sampling: sampling.py). delay.py turns
  columns into aligned frames: the first frame arrives after 9 steps (prefill + 8 decodes), then one per
  step; the stop after EOS runs the reference's nine-column diagonal.
* Codec. DAC 44.1 kHz (Dia's too, models/codecs/dac/codec.py), found as the reference finds it: the
  `descript/dac_44khz` hub snapshot in the local cache, or a `codec/` folder beside the checkpoint (tests,
  the demo). It streams exactly: each chunk's last 4757 samples (9.29 frames, the decoder's right context)
  wait for the next chunk, so the concatenated stream equals one decode of all frames; we do not use the
  reference's 50-frame windows with a 9-frame overlap (its streaming helper's approximation).
* Re-runnability (models/base.py): prefill rebuilds each row's state from its prompt; decode plans every
  row's new column first and commits all rows only after the batch has been sampled; sampling draws are
  taken from each request's generator and put back (generator state restored) if the step raises.
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
)
from ..checkpoint import checkpoint_entries, fill_module
from ..device_memory import pool_zeros
from ..dtypes import dtype_name
from ..layers import PagedBatch
from ..locate import cached_snapshot, offline_note, read_json, resolve
from .config import CODEBOOKS, ZonosConfig, parse_config
from .delay import DelayTracker
from .layers import ZonosWeights
from .options import EMOTIONS, OPTIONS
from .sampling import RowSampling, choose, guide, penalize
from .sampling import resolve as resolve_sampling
from .speaker_features import check_clip
from .speaker_model import SpeakerClips
from .spec import DEFAULT_MAX_FRAMES, DTYPE_POLICY, MAX_CONTEXT, model_spec
from .text import language_id, phoneme_ids, warm_up_text

DEFAULT_GUIDANCE = 2.0  # the reference's generate(cfg_scale=2.0)
SPEAKER_DIM = 128
DAC_HUB_ID = "descript/dac_44khz"


@dataclass
class PreparedZonos:
    ids: list[int]  # BOS, phoneme ids, EOS
    values: dict[str, np.ndarray | None]  # conditioner name -> the request's value (None: unconditional)
    sampling: RowSampling
    guidance: float
    seed: int | None


@dataclass
class ZonosState:
    tracker: DelayTracker
    sampling: RowSampling
    guidance: float
    gen: torch.Generator
    n_pages: int  # pages per sequence


def resolve_codec(root: Path) -> Path:
    local = Path(root) / "codec"
    if local.is_dir():
        return local
    snap = cached_snapshot(DAC_HUB_ID)
    if snap is None:
        raise CheckpointError(
            f"the DAC codec {DAC_HUB_ID!r} that Zonos decodes with is not in the local Hugging Face cache"
            f"{offline_note()}; download it with `vox models pull {DAC_HUB_ID}` or put a "
            f"DacModel.save_pretrained folder at {local}"
        )
    return snap


class ZonosProgram(ModelProgram):
    option_schema = OPTIONS

    def __init__(
        self,
        root: Path,
        cfg: ZonosConfig,
        weights: ZonosWeights,
        device: torch.device,
        dtype: torch.dtype,
        name: str,
    ) -> None:
        self.root, self.cfg, self.weights = root, cfg, weights
        self.device, self.dtype = device, dtype
        self.spec = model_spec(root, name)
        self.speaker_clips = SpeakerClips(root, device)  # --ref-audio: loaded on the first clip
        self.k_pool: torch.Tensor | None = None
        self.v_pool: torch.Tensor | None = None
        self.page_size = 0
        self._codec = None
        self.prefix_extra = len(cfg.conditioners) - 1  # one token per non-text conditioner

    # --- loading ---------------------------------------------------------------------------------
    @classmethod
    def load(cls, source: str, device: str = "cpu", dtype: str = "float32") -> ZonosProgram:
        lm_dtype = DTYPE_POLICY.torch_dtype("lm", dtype)
        root = resolve(source)
        cfg = parse_config(read_json(root / "config.json"), str(root / "config.json"))
        with torch.device("meta"):
            weights = ZonosWeights(cfg)
        fill_module(weights, checkpoint_entries(root), root, torch.device(device), lm_dtype)
        name = source if not Path(source).exists() else root.name
        program = cls(root, cfg, weights.eval(), torch.device(device), lm_dtype, name)
        warm_up_text()
        return program

    @property
    def codec_model(self):  # noqa: ANN201 - DacCodec, imported on first use
        if self._codec is None:
            from ..codecs.dac.codec import DacCodec

            dtype = DTYPE_POLICY.name("codec", dtype_name(self.dtype))
            self._codec = DacCodec.load(resolve_codec(self.root), device=str(self.device), dtype=dtype)
        return self._codec

    # --- host: prompts ---------------------------------------------------------------------------
    def check(self, request: SynthesisRequest) -> None:
        self._values(request)

    def _values(
        self, request: SynthesisRequest
    ) -> tuple[str, dict[str, np.ndarray | None], RowSampling, float]:
        """Everything `prepare` refuses without phonemizing (one sentence each)."""
        check_numbers(request)
        if not request.text or not request.text.strip():
            raise InputError("the text is empty")
        lang, lang_id = language_id(request.language)
        if request.ref_text is not None:
            raise InputError(
                "Zonos' speaker model takes the clip alone (--ref-audio); drop the transcript (--ref-text)"
            )
        if request.ref_audio is not None:
            if request.voice is not None:
                raise InputError(
                    "give either a saved voice (--voice) or a reference clip (--ref-audio), not both"
                )
            check_clip(request.ref_audio, request.ref_sample_rate)
            self.speaker_clips.check_files()
        if request.instructions:
            raise InputError(
                "Zonos takes no instructions; steer it with the emotion_* and pitch/rate options"
            )
        guidance = DEFAULT_GUIDANCE if request.cfg_scale is None else float(request.cfg_scale)
        if guidance == 1.0:
            raise InputError(
                "Zonos always runs with classifier-free guidance: cfg_scale must not be 1 "
                f"(default {DEFAULT_GUIDANCE})"
            )
        opts = self.options_of(request)
        emotion = np.array([opts[f"emotion_{e}"] for e in EMOTIONS], dtype=np.float32)
        if float(emotion.sum()) <= 0:
            raise InputError("the emotion_* options must not all be 0 (they are normalised to sum 1)")
        speaker = None
        if request.voice is not None:
            resolved = self.spec.resolve_voice(request.voice, request.voice_paths)
            assert resolved.path is not None  # Zonos' catalog holds files alone
            speaker = self._speaker(resolved.path)
        values: dict[str, np.ndarray | None] = {
            "speaker": speaker,
            "emotion": emotion,
            "fmax": np.array([opts["fmax"]], dtype=np.float32),
            "pitch_std": np.array([opts["pitch_std"]], dtype=np.float32),
            "speaking_rate": np.array([opts["speaking_rate"]], dtype=np.float32),
            "language_id": np.array([lang_id], dtype=np.int64),
        }
        sampling = resolve_sampling(request.sampling, opts["min_p"], opts["repetition_window"])
        return lang, values, sampling, guidance

    def _speaker(self, path: Path) -> np.ndarray:
        try:  # a voice file from the command line may be any .npy: no pickles, one sentence if it is not
            emb = np.load(path, allow_pickle=False).astype(np.float32).reshape(-1)
        except (OSError, ValueError) as e:
            raise InputError(f"speaker embedding {path} is not a numpy array file: {e}") from None
        if emb.shape != (SPEAKER_DIM,) or not np.isfinite(emb).all():
            raise InputError(f"speaker embedding {path} must hold {SPEAKER_DIM} finite numbers")
        return emb

    def prepare(self, request: SynthesisRequest) -> Prompt:
        lang, values, sampling, guidance = self._values(request)
        ids = phoneme_ids(request.text, lang)
        if request.ref_audio is not None:
            assert request.ref_sample_rate is not None  # check_clip refused a clip without its rate
            values["speaker"] = self.speaker_clips.embedding(request.ref_audio, request.ref_sample_rate)
        max_frames = DEFAULT_MAX_FRAMES if request.max_frames is None else request.max_frames
        if max_frames < 1:
            raise InputError(f"max_frames must be >= 1, got {max_frames}")
        length = len(ids) + self.prefix_extra + 1
        frames = request.fixed_frames if request.fixed_frames is not None else max_frames
        if length + frames + CODEBOOKS > MAX_CONTEXT:
            raise InputError(
                f"the text ({len(ids)} phonemes) and {frames} frames exceed Zonos' context of "
                f"{MAX_CONTEXT} positions; shorten the text or lower max_frames"
            )
        data = PreparedZonos(ids=ids, values=values, sampling=sampling, guidance=guidance, seed=request.seed)
        return Prompt(
            length=length,
            data=data,
            max_frames=max_frames,
            fixed_frames=request.fixed_frames,
            width=2,
            lead_steps=CODEBOOKS - 1,
        )

    # --- device resources ------------------------------------------------------------------------
    def _pages_per_sequence(self, prompt: Prompt) -> int:
        if self.page_size == 0:
            raise RuntimeError("the KV pool is not allocated: call init_kv(num_pages, page_size) first")
        frames = prompt.max_frames if prompt.fixed_frames is None else prompt.fixed_frames
        return -(-(prompt.length + frames + CODEBOOKS) // self.page_size)

    def kv_tokens(self, prompt: Prompt) -> int:
        return 2 * self._pages_per_sequence(prompt) * self.page_size

    def init_kv(self, num_pages: int, page_size: int) -> None:
        b = self.cfg.backbone
        shape = (b.n_layer, num_pages, page_size, b.num_heads_kv, b.head_dim)
        self.k_pool = pool_zeros(shape, self.dtype, self.device)
        self.v_pool = pool_zeros(shape, self.dtype, self.device)
        self.page_size = page_size

    def memory_needs(self) -> MemoryNeeds:
        from ..codecs.dac.config import DacCodecConfig
        from ..codecs.dac.memory import dac_costs

        b = self.cfg.backbone
        e = torch.empty((), dtype=self.dtype, device="meta").element_size()
        kv_elems = b.num_heads_kv * b.head_dim
        per_token = e * (6 * b.d_model + 3 * b.mlp + (b.num_heads + 2 * b.num_heads_kv) * b.head_dim)
        slot, per_frame, dac_weights = dac_costs(
            DacCodecConfig.read(resolve_codec(self.root) / "config.json"), self.dtype
        )
        return MemoryNeeds(
            kv_bytes_per_position=2 * b.n_layer * kv_elems * e,
            codec_slot_bytes=slot,
            # eager attention gathers one layer's K and V of every position in use
            gather_bytes_per_position=2 * kv_elems * e + 1,
            prefill_bytes_per_token=per_token,
            prefill_bytes_per_token_pair=1 + e,
            decode_bytes_per_row=per_token + 4 * 4 * CODEBOOKS * 1026,
            codec_bytes_per_frame=per_frame,
            pending_weight_bytes=0 if self._codec is not None else dac_weights,
            extra_positions_per_row=CODEBOOKS,
            rows_per_request=2,
        )

    def init_codec_slots(self, num_slots: int) -> None:
        self.codec_model.init_slots(num_slots)

    # --- stages ----------------------------------------------------------------------------------
    def _batch(self, rows: list[Row], counts: list[int], starts: list[int]) -> PagedBatch:
        """Both sequences of every row (conditional first), `counts[i]` new positions from `starts[i]`."""
        ps = self.page_size
        tables, firsts, ns = [], [], []
        for r, n, s0 in zip(rows, counts, starts, strict=True):
            per = r.state.n_pages
            if len(r.pages) < 2 * per:
                raise RuntimeError(f"request {r.request_id} holds {len(r.pages)} KV pages, needs {2 * per}")
            if s0 + n > per * ps:
                raise RuntimeError(f"request {r.request_id} needs {s0 + n} positions, holds {per * ps}")
            for seq in range(2):
                tables.append(r.pages[seq * per : (seq + 1) * per])
                firsts.append(s0)
                ns.append(n)
        width = max(len(t) for t in tables)
        table = torch.tensor([t + [t[0]] * (width - len(t)) for t in tables], dtype=torch.long)
        T = max(ns)
        j = torch.arange(T)
        first, n = torch.tensor(firsts), torch.tensor(ns)
        valid = j[None, :] < n[:, None]
        pos = torch.where(valid, first[:, None] + j[None, :], 0)
        slots = torch.where(valid, table.gather(1, pos // ps) * ps + pos % ps, -1)
        d = self.device
        return PagedBatch(pos.to(d), slots.to(d), table.to(d), (first + n).to(d), ps)

    def _prefix(self, p: PreparedZonos) -> tuple[torch.Tensor, torch.Tensor]:
        """The conditional and unconditional prefixes [P, d] of one request."""
        dev = self.device
        ids = torch.tensor(p.ids, dtype=torch.long, device=dev)
        cond: dict[str, torch.Tensor | None] = {"espeak": ids}
        for name, v in p.values.items():
            if v is None:
                cond[name] = None
                continue
            t = torch.from_numpy(v).to(dev)
            if name == "emotion":
                t = t / t.sum(dim=-1)
            cond[name] = t.to(self.dtype) if t.is_floating_point() else t
        pc = self.weights.prefix_conditioner
        return pc(cond), pc({"espeak": ids})

    def _logits(self, rows: list[Row], hidden: torch.Tensor) -> torch.Tensor:
        """Guided float32 logits [B, 9, 1026] from both sequences' last hidden states [2B, d]."""
        logits = self.weights.logits(hidden)
        scale = torch.tensor([r.state.guidance for r in rows], dtype=torch.float32, device=logits.device)
        return guide(logits[0::2], logits[1::2], scale)

    def _sample(self, rows: list[Row], logits: torch.Tensor, prefill: bool) -> list[StepOutput]:
        if not prefill:
            logits = logits.clone()
            logits[:, 1:, self.cfg.eos_token_id] = -torch.inf  # only codebook 0 may say EOS
        saved = [r.state.gen.get_state() for r in rows]
        try:
            plans = []
            for b, r in enumerate(rows):
                st: ZonosState = r.state
                row = logits[b]
                if not prefill and st.sampling.penalty != 1.0:
                    recent = torch.from_numpy(st.tracker.recent(st.sampling.window)).to(row.device)
                    row = penalize(row, recent, st.sampling.penalty)
                tokens = choose(row, st.sampling, st.gen).cpu().numpy()
                plans.append(st.tracker.plan(tokens, prefill))
        except BaseException:
            for r, s in zip(rows, saved, strict=True):
                r.state.gen.set_state(s)
            raise
        out = []
        for r, plan in zip(rows, plans, strict=True):  # commit: nothing below raises
            frame, done = r.state.tracker.record(plan)
            if frame is not None:
                r.frames_emitted += 1
            out.append(StepOutput(frame=frame, done=done))
        return out

    @torch.inference_mode()
    def prefill(self, rows: list[Row]) -> list[StepOutput]:
        if not rows:
            return []
        if self.k_pool is None:
            raise RuntimeError("the KV pool is not allocated: call init_kv(num_pages, page_size) first")
        seqs = []
        for r in rows:
            p: PreparedZonos = r.prompt.data
            fixed = r.prompt.fixed_frames is not None
            seed = p.seed if p.seed is not None else secrets.randbits(63)
            r.state = ZonosState(
                tracker=DelayTracker(
                    limit=r.prompt.fixed_frames if fixed else r.prompt.max_frames,
                    eos=self.cfg.eos_token_id,
                    masked=self.cfg.masked_token_id,
                    stop_on_eos=not fixed,
                ),
                sampling=p.sampling,
                guidance=p.guidance,
                gen=torch.Generator().manual_seed(seed),
                n_pages=self._pages_per_sequence(r.prompt),
            )
            r.frames_emitted = 0
            first = torch.from_numpy(r.state.tracker.last_input()).to(self.device)
            start = self.weights.embed_codes(first)[None]
            for prefix in self._prefix(p):
                seqs.append(torch.cat([prefix.to(self.dtype), start.to(self.dtype)]))
        counts = [r.prompt.length for r in rows]
        x = torch.zeros(len(seqs), max(counts), seqs[0].shape[-1], dtype=self.dtype, device=self.device)
        for i, s in enumerate(seqs):
            x[i, : s.shape[0]] = s
        pb = self._batch(rows, counts, [0] * len(rows))
        hid = self.weights.backbone(x, self.k_pool, self.v_pool, pb)
        last = torch.tensor([c - 1 for c in counts for _ in range(2)], device=self.device)
        logits = self._logits(rows, hid[torch.arange(len(seqs), device=self.device), last])
        out = self._sample(rows, logits, prefill=True)
        for r, c in zip(rows, counts, strict=True):
            r.kv_len = c
        return out

    @torch.inference_mode()
    def decode(self, rows: list[Row]) -> list[StepOutput]:
        if not rows:
            return []
        codes = np.stack([r.state.tracker.last_input() for r in rows for _ in range(2)])
        x = self.weights.embed_codes(torch.from_numpy(codes).to(self.device))[:, None]
        pb = self._batch(rows, [1] * len(rows), [r.kv_len for r in rows])
        hid = self.weights.backbone(x.to(self.dtype), self.k_pool, self.v_pool, pb)
        out = self._sample(rows, self._logits(rows, hid[:, 0]), prefill=False)
        for r in rows:
            r.kv_len += 1
        return out

    def codec(self, items: list[CodecItem]) -> list[np.ndarray]:
        return self.codec_model.decode(items)

    def release(self, row: Row) -> None:
        if row.slot >= 0 and self._codec is not None:
            self._codec.release_slot(row.slot)
        row.state = None
