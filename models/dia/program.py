"""Dia (Nari Labs; transformers `DiaForConditionalGeneration`) as a voxcli model program.

An encoder-decoder: the byte-level text encoder runs once at prefill; the audio decoder emits one
position of 9 delayed codebook channels per step. What the engine sees:

* Rows. A request with guidance w > 1 is ONE row of width 2 (`Prompt.width`): its conditional and
  unconditional sequences always run in the same forward pass, share one sampled token per channel
  and step (appended to both), and are admitted, cancelled and freed together because they are one
  Row holding one page list. w = 1 is width 1. The scheduler counts a width-2 row as 2 rows toward a
  bucket, max_running and the prefill batch, and never splits it across batches.
* KV memory. Everything a row keeps lives in the engine's paged KV pool, in the row's own pages:
  per sequence, first its decoder self-attention region (positions), then its cross-attention region
  (the encoder K/V of every decoder layer, computed once at prefill and read by every step). A cross
  token needs cross_kv_heads * cross_head_dim values where a self position holds kv_heads * head_dim
  (4x for Dia-1.6B), so the cross region is packed densely across whole pages and `kv_tokens` reserves
  ceil(text_tokens * ratio / page) pages for it (a shared unconditional sequence has no cross region:
  its cross-attention is a constant, shared_cross.py). Pages rather than per-row side slots: one pool, one
  admission rule (a request runs only if all its memory is reserved), no second allocator to size, and
  the memory comes back with the row's pages the moment the LM finishes.
* Frames. The engine receives ALIGNED frames only (delay.py undoes the delay pattern; the first frame
  arrives after max(delay) + 1 = 16 decoder steps, then one per step; the drain after EOS runs here).
  TTFA therefore pays 15 extra decoder steps (measured by `python -m benchmarks bench_dia`: 16 steps to
  the first frame), plus the DAC's ~9.3 frames of look-ahead before the first audible sample (dac.py).
* Re-runnable stages (fault isolation, models/base.py): prefill rebuilds each row's state (delay tracker,
  generator) from its prompt and rewrites its self and cross pages; `_step` peeks the rows' uniforms and
  commits every row (uniforms, kv_len, EOS countdown, delay tracker) only after sampling the whole batch;
  the DAC checks every chunk before it decodes and scatters slot state back after the whole batch.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

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
from ..device_memory import pool_zeros
from ..dtypes import dtype_name
from ..sampling import draw
from .checkpoint import load_strict, read_json, resolve
from .config import DiaConfig, GenerationDefaults, parse_config
from .delay import DelayTracker
from .layers import DiaWeights, PagedKV, pack_cross
from .prompt import PreparedDia, clone_text, resolve_sampling, validate
from .sampling import RowSampling, process
from .shared_cross import build_plans, uncond_constants
from .spec import DEFAULT_CHUNKS, DTYPE_POLICY, HOP, SAMPLE_RATE, model_spec  # noqa: F401 (re-exported)

UNCOND_KEY = "dia-uncond"  # Prompt.uncond_key of every CFG pair


@dataclass
class DiaState:
    """Per-request decode state (Row.state)."""

    tracker: DelayTracker
    sampling: RowSampling
    gen: torch.Generator
    width: int
    n_self: int  # pages per sequence for decoder self-attention
    n_cross: int  # pages per sequence for the packed encoder K/V
    cross_len: int  # text tokens
    active: bool  # the EOS drain has started
    countdown: np.ndarray  # [C] steps until each channel is forced to EOS (once active)
    fixed: bool  # bench: ignore EOS, emit exactly max_frames frames
    uid: int  # unique per prefill within this program (keys the dense cross K/V reuse)
    shared: bool  # a pair whose unconditional sequence shares work (shared_cross.py; share_uncond at prefill)
    ublock: torch.Tensor | None = None  # uniforms drawn ahead from `gen` (see peek_uniforms)
    uidx: int = 0


UNIFORM_BLOCK = 64  # steps of uniforms drawn from a request's generator at once


def peek_uniforms(st: DiaState, channels: int) -> torch.Tensor:
    """This step's uniforms (one per channel) without consuming them: a step takes them (`st.uidx += 1`)
    only once it has succeeded for every row, so a step that raises can be re-run (models/base.py). The
    CPU generator fills a tensor element by element in order, so a block holds exactly the values of
    one `torch.rand(channels)` per step."""
    if st.ublock is None or st.uidx >= st.ublock.shape[0]:
        st.ublock = torch.rand(UNIFORM_BLOCK, channels, generator=st.gen, dtype=torch.float64)
        st.uidx = 0
    return st.ublock[st.uidx]


class DiaProgram(ModelProgram):
    # The unconditional sequences of CFG pairs take one constant per layer for their cross-attention (no
    # encoder pass, no cross pages) and reuse their partner's layer-0 self-attention (shared_cross.py;
    # exact up to float rounding). False runs every sequence on its own (`python -m benchmarks bench_cfg`
    # measures both in one run). A request keeps the setting of its prefill (DiaState.shared); its pages
    # must have been sized (`kv_tokens`) under the same setting.
    share_uncond: bool = True

    def __init__(
        self,
        root: Path,
        cfg: DiaConfig,
        gen: GenerationDefaults,
        weights: DiaWeights,
        device: torch.device,
        dtype: torch.dtype,
        name: str,
    ) -> None:
        self.root, self.cfg, self.gen, self.weights = root, cfg, gen, weights
        self.device, self.dtype = device, dtype
        self.spec = model_spec(cfg, root, name)
        d = cfg.decoder
        self.self_elems = d.num_key_value_heads * d.head_dim
        self.cross_elems = d.cross_num_key_value_heads * d.cross_head_dim
        self.k_pool: torch.Tensor | None = None
        self.v_pool: torch.Tensor | None = None
        self.page_size = 0
        self._codec = None
        # Cross K/V gathered densely for the last decode batch, reused while its members stay the same
        # (the cross pages never change during a request): the gather is most of a CPU step's copying.
        self._cross_key: tuple | None = None
        self._cross_dense: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        self._uid = 0
        self._uncond_c: list[torch.Tensor] | None = None  # shared_cross.uncond_constants, on first use

    # --- loading ---------------------------------------------------------------------------------
    @classmethod
    def load(cls, source: str, device: str = "cpu", dtype: str = "float32") -> DiaProgram:
        lm_dtype = DTYPE_POLICY.torch_dtype("lm", dtype)
        root = resolve(source)
        cfg = parse_config(read_json(root / "config.json"), str(root / "config.json"))
        gpath = root / "generation_config.json"
        gen = (GenerationDefaults.from_dict(read_json(gpath), str(gpath)) if gpath.exists()
               else GenerationDefaults())
        with torch.device("meta"):
            weights = DiaWeights(cfg)
        load_strict(weights, root, torch.device(device), lm_dtype)
        name = source if not Path(source).exists() else root.name
        return cls(root, cfg, gen, weights.eval(), torch.device(device), lm_dtype, name)

    @property
    def codec_model(self):
        if self._codec is None:
            from ..codecs.dac.codec import DacCodec
            from .checkpoint import resolve_codec

            dtype = DTYPE_POLICY.name("codec", dtype_name(self.dtype))
            self._codec = DacCodec.load(resolve_codec(self.root), device=str(self.device), dtype=dtype)
        return self._codec

    # --- host: prompts ---------------------------------------------------------------------------
    def prepare(self, request: SynthesisRequest, *, ref_codes: np.ndarray | None = None) -> Prompt:
        """`ref_codes` injects a voice-clone prompt's DAC codes computed elsewhere (tests)."""
        text = request.text
        if request.ref_audio is not None or ref_codes is not None:
            text = clone_text(request.ref_text or "", request.text)
        ids = validate(self.cfg, request if ref_codes is None else _with_ref(request), text)
        sampling = resolve_sampling(self.gen, request)
        codes = ref_codes
        if codes is None and request.ref_audio is not None:
            codes = self.reference_codes(request.ref_audio, request.ref_sample_rate)
        prompt_frames = 0 if codes is None else int(codes.shape[0])
        default = (
            self.gen.max_new_tokens - 1 - self.cfg.max_delay
            if self.gen.max_new_tokens
            else self.gen.max_length - 2 - prompt_frames
        )
        if request.max_frames is None and default < 1:
            raise InputError(
                f"the reference clip is {prompt_frames} frames long, which leaves no room in "
                f"the checkpoint's max_length {self.gen.max_length}; use a shorter clip"
            )
        max_frames = request.max_frames if request.max_frames is not None else default
        if max_frames < 1:
            raise InputError(f"max_frames must be >= 1, got {max_frames}")
        if request.fixed_frames is not None and request.fixed_frames < 1:
            raise InputError(f"fixed_frames must be >= 1, got {request.fixed_frames}")
        data = PreparedDia(ids=ids, codes=codes, sampling=sampling, seed=request.seed)
        return Prompt(
            length=1 + prompt_frames,
            data=data,
            max_frames=max_frames,
            fixed_frames=request.fixed_frames,
            width=2 if sampling.guidance != 1.0 else 1,
            # every pair's unconditional cross-attention is the same constant (shared_cross.py): one key
            uncond_key=UNCOND_KEY if sampling.guidance != 1.0 else None,
        )

    def check(self, request: SynthesisRequest) -> None:
        """Everything `prepare` refuses without encoding audio: text, voice, language, options, clone
        fields, cfg_scale, sampling (one sentence each)."""
        text = request.text
        if request.ref_audio is not None:
            text = clone_text(request.ref_text or "", request.text)
            if request.ref_sample_rate is not None and request.ref_sample_rate <= 0:
                raise InputError(f"the reference audio's sample rate must be positive, got "
                                 f"{request.ref_sample_rate}")
        validate(self.cfg, request, text)
        resolve_sampling(self.gen, request)

    def reference_codes(self, wav: np.ndarray, sample_rate: int | None) -> np.ndarray:
        if sample_rate is None:
            raise InputError("the reference audio needs its sample rate")
        clip = np.asarray(wav, dtype=np.float32)
        if sample_rate != self.spec.sample_rate and clip.ndim == 1:
            # a clip at another rate is resampled to the DAC's (as every family does), not refused
            from ..audio.resample import resample

            clip = resample(torch.from_numpy(np.ascontiguousarray(clip)), sample_rate,
                            self.spec.sample_rate).numpy()
            sample_rate = self.spec.sample_rate
        codes = self.codec_model.encode(clip, sample_rate)
        codes = np.asarray(codes, dtype=np.int64)
        if codes.ndim != 2 or codes.shape[1] != self.cfg.decoder.num_channels or codes.shape[0] < 1:
            raise InputError("the reference audio is too short to give one codec frame")
        return codes

    # --- device resources ------------------------------------------------------------------------
    def _layout(self, prompt: Prompt) -> tuple[int, int]:
        """Pages per sequence: (self-attention positions, packed cross K/V; a shared unconditional
        sequence holds no cross pages)."""
        if self.page_size == 0:
            raise RuntimeError("the KV pool is not allocated: call init_kv(num_pages, page_size) first")
        frames = prompt.max_frames if prompt.fixed_frames is None else prompt.fixed_frames
        positions = prompt.length + frames + self.cfg.max_delay
        n_self = -(-positions // self.page_size)
        per_page = self.page_size * self.self_elems
        n_cross = -(-(len(prompt.data.ids) * self.cross_elems) // per_page)
        return n_self, n_cross

    def kv_tokens(self, prompt: Prompt) -> int:
        n_self, n_cross = self._layout(prompt)
        uncond = 0 if prompt.width == 1 else n_self + (0 if self.share_uncond else n_cross)
        return (n_self + n_cross + uncond) * self.page_size

    def init_kv(self, num_pages: int, page_size: int) -> None:
        d = self.cfg.decoder
        shape = (d.num_hidden_layers, num_pages, page_size, d.num_key_value_heads, d.head_dim)
        self.k_pool = pool_zeros(shape, self.dtype, self.device)
        self.v_pool = pool_zeros(shape, self.dtype, self.device)
        self.page_size = page_size
        self._cross_key, self._cross_dense = None, None

    def memory_needs(self) -> MemoryNeeds:
        from ..codecs.dac.config import DacCodecConfig
        from .checkpoint import resolve_codec
        from .memory import memory_needs

        dac = DacCodecConfig.read(resolve_codec(self.root) / "config.json")
        return memory_needs(self.cfg, dac, self.dtype, self.gen.guidance_scale,
                            codec_loaded=self._codec is not None)

    def init_codec_slots(self, num_slots: int) -> None:
        self.codec_model.init_slots(num_slots)

    # --- stages ----------------------------------------------------------------------------------
    def _seq_pages(self, row: Row, s: int) -> tuple[list[int], list[int]]:
        """Sequence s's (self pages, cross pages): the conditional one's first, then the unconditional
        one's (its self pages only when it is shared)."""
        st: DiaState = row.state
        per = st.n_self + st.n_cross
        uncond = st.n_self + (0 if st.shared else st.n_cross)
        need = per + (uncond if st.width == 2 else 0)
        if len(row.pages) < need:
            raise RuntimeError(f"request {row.request_id} holds {len(row.pages)} KV pages, needs {need}")
        pages = row.pages[:per] if s == 0 else row.pages[per : per + uncond]
        return pages[: st.n_self], pages[st.n_self :]

    def _paged(self, seqs: list[tuple[Row, int]], starts: list[int], counts: list[int]) -> PagedKV:
        ps = self.page_size
        T = max(counts)
        tables, ctables = [], []
        for (r, s), st0, n in zip(seqs, starts, counts, strict=True):
            own, cross = self._seq_pages(r, s)
            if st0 + n > len(own) * ps:
                raise RuntimeError(f"request {r.request_id} needs {st0 + n} positions, holds {len(own) * ps}")
            tables.append(own)
            ctables.append(cross or own[:1])  # a shared unconditional sequence's row is never read
        P = max(len(t) for t in tables)
        Pc = max(len(t) for t in ctables)
        table = torch.tensor([t + [t[0]] * (P - len(t)) for t in tables], dtype=torch.long)
        ctable = torch.tensor([t + [t[0]] * (Pc - len(t)) for t in ctables], dtype=torch.long)
        # query i of sequence b sits at position starts[b] + i (padding past counts[b]: position 0, slot -1)
        first, n = torch.tensor(starts), torch.tensor(counts)
        j = torch.arange(T)
        valid = j[None, :] < n[:, None]
        pos = torch.where(valid, first[:, None] + j[None, :], 0)
        slots = torch.where(valid, table.gather(1, pos // ps) * ps + pos % ps, -1)
        kv_len = first + n
        cross_len = torch.tensor([r.state.cross_len for r, _ in seqs])
        d = self.device
        return PagedKV(pos.to(d), slots.to(d), table.to(d), kv_len.to(d), ctable.to(d), cross_len.to(d), ps)

    def _encode(self, rows: list[Row]) -> None:
        """Run the text encoder for every sequence of `rows` and write each decoder layer's cross K/V
        into the sequence's cross pages. Sequences are batched by text length (no padding, so a
        request's encoder output does not depend on its batch-mates). A shared unconditional sequence
        needs none: its cross-attention is a constant (shared_cross.py)."""
        groups: dict[int, list[tuple[Row, int]]] = {}
        for r in rows:
            for s in range(1 if r.state.shared else r.state.width):
                groups.setdefault(r.state.cross_len, []).append((r, s))
        per_page = self.page_size * self.self_elems
        d = self.cfg.decoder
        for L, seqs in groups.items():
            ids = torch.tensor([r.prompt.data.ids if s == 0 else [0] * L for r, s in seqs],
                               dtype=torch.long, device=self.device)
            enc = self.weights.model.encoder(ids, None)
            for li, layer in enumerate(self.weights.model.decoder.layers):
                k, v = layer.cross_kv(enc)  # [n, L, heads, hd]
                for b, (r, s) in enumerate(seqs):
                    _, cross = self._seq_pages(r, s)
                    idx = torch.tensor(cross, dtype=torch.long, device=self.device)
                    shape = (len(cross), self.page_size, d.num_key_value_heads, d.head_dim)
                    self.k_pool[li, idx] = pack_cross(k[b], per_page).view(shape).to(self.dtype)
                    self.v_pool[li, idx] = pack_cross(v[b], per_page).view(shape).to(self.dtype)

    def _forward(self, rows: list[Row], tokens: list[np.ndarray], starts: list[int]) -> torch.Tensor:
        """Feed each row's tokens [n_i, C] (both sequences of a pair get the same ones) at positions
        starts[i]...; return the final hidden state of each sequence's last position [S, H]."""
        every = [(r, s, t, a) for r, t, a in zip(rows, tokens, starts, strict=True)
                 for s in range(r.state.width)]
        shared_at = [s == 1 and r.state.shared for r, s, _, _ in every]
        # the sequences that run their own cross-attention first, then the shared unconditional ones: the
        # layers take the two parts as slices (shared_cross.py), not gathers
        order = [i for i, sh in enumerate(shared_at) if not sh] + [i for i, sh in enumerate(shared_at) if sh]
        n_own = len(order) - sum(shared_at)
        seqs = [every[i][:2] for i in order]
        counts = [every[i][2].shape[0] for i in order]
        st = [every[i][3] for i in order]
        T, C = max(counts), self.cfg.decoder.num_channels
        x = torch.zeros(len(seqs), T, C, dtype=torch.long)
        for j, i in enumerate(order):
            x[j, : counts[j]] = torch.from_numpy(every[i][2])
        pk = self._paged(seqs, st, counts)
        shared = n_own < len(seqs)
        key = tuple((r.state.uid, s) for r, s in seqs)
        if key != self._cross_key or self._cross_dense is None:
            self._cross_key, self._cross_dense = None, None  # never keep a stale one on failure
            layers = self.weights.model.decoder.layers
            if shared:
                if self._uncond_c is None:
                    self._uncond_c = uncond_constants(self.weights)
                self._cross_dense = build_plans(layers, self.k_pool, self.v_pool, pk.cross_table, n_own,
                                                [r.state.cross_len for r, _ in seqs[:n_own]], self._uncond_c)
            else:
                self._cross_dense = [layer.gather_cross_kv(self.k_pool[i], self.v_pool[i], pk)
                                     for i, layer in enumerate(layers)]
            self._cross_key = key
        pk.cross_dense = self._cross_dense
        if shared:
            rank = {i: j for j, i in enumerate(order[:n_own])}
            # layer 0: own sequence j keeps its result, a shared one takes its partner's (i - 1 in `every`)
            source = list(range(n_own)) + [rank[i - 1] for i in order[n_own:]]
            pk.first_layer_reuse = (n_own, torch.tensor(source, device=self.device))
        w = self.weights
        hid = w.model.decoder(x.to(self.device), self.k_pool, self.v_pool, pk)
        last = hid[torch.arange(len(seqs), device=self.device), torch.tensor(counts, device=self.device) - 1]
        if not shared:
            return last
        back = [0] * len(order)  # each row's sequences adjacent again, as _step reads them
        for j, i in enumerate(order):
            back[i] = j
        return last[torch.tensor(back, device=self.device)]

    def _step(self, rows: list[Row], hidden: torch.Tensor, kv_len: list[int]) -> list[StepOutput]:
        """Sample each row's tokens from the sequences' final `hidden` states [S, H], then commit every
        row's new state (`kv_len`: each row's KV length after this step)."""
        states: list[DiaState] = [r.state for r in rows]
        first = []
        i = 0
        for st in states:
            first.append(i)
            i += st.width
        unc_of = [f + 1 if st.width == 2 else f for f, st in zip(first, states, strict=True)]
        dev = hidden.device
        logits = self.weights.logits(hidden)
        cond, unc = logits[first], logits[unc_of]
        active = torch.tensor([st.active for st in states], device=dev)
        countdown = torch.tensor(np.stack([st.countdown for st in states]), device=dev)
        reached = torch.tensor([st.tracker.position == st.tracker.limit_pos for st in states], device=dev)
        no_eos = torch.tensor([st.fixed for st in states], device=dev)
        scores, active, countdown = process(
            cond,
            unc,
            [st.sampling for st in states],
            self.cfg.eos_token_id,
            active,
            countdown,
            reached,
            no_eos,
        )
        greedy = torch.tensor([st.sampling.greedy for st in states], device=dev)
        C = self.cfg.decoder.num_channels
        u = torch.stack([peek_uniforms(st, C) for st in states]).to(dev)
        tokens = draw(scores, greedy, u).cpu().numpy()
        act, cd = active.tolist(), countdown.cpu().numpy()
        out = []
        # Commit: no row's state changed above, and nothing below raises (re-runnability, models/base.py).
        for b, (r, st) in enumerate(zip(rows, states, strict=True)):
            st.uidx += 1
            r.kv_len = kv_len[b]
            st.active, st.countdown = act[b], cd[b]
            frames, done = st.tracker.record(tokens[b])
            frame = frames[0] if frames else None
            if frame is not None:
                r.frames_emitted += 1
            out.append(StepOutput(frame=frame, done=done))
        return out

    def _next_uid(self) -> int:
        self._uid += 1
        return self._uid

    @torch.inference_mode()
    def prefill(self, rows: list[Row]) -> list[StepOutput]:
        if not rows:
            return []
        if self.k_pool is None:
            raise RuntimeError("the KV pool is not allocated: call init_kv(num_pages, page_size) first")
        C = self.cfg.decoder.num_channels
        for r in rows:
            p: PreparedDia = r.prompt.data
            n_self, n_cross = self._layout(r.prompt)
            fixed = r.prompt.fixed_frames is not None
            frames = r.prompt.fixed_frames if fixed else r.prompt.max_frames
            seed = p.seed if p.seed is not None else secrets.randbits(63)
            r.state = DiaState(
                tracker=DelayTracker(
                    p.codes,
                    self.cfg.delay_pattern,
                    self.cfg.bos_token_id,
                    self.cfg.eos_token_id,
                    self.cfg.pad_token_id,
                    frames,
                ),
                sampling=p.sampling,
                gen=torch.Generator().manual_seed(seed),
                width=r.prompt.width,
                n_self=n_self,
                n_cross=n_cross,
                cross_len=len(p.ids),
                active=False,
                countdown=np.asarray(self.cfg.delay_pattern, dtype=np.int64).reshape(C),
                fixed=fixed,
                uid=self._next_uid(),
                shared=self.share_uncond and r.prompt.width == 2,
            )
            r.frames_emitted = 0
        self._encode(rows)
        prefixes = [r.state.tracker.prefix_inputs() for r in rows]
        hidden = self._forward(rows, prefixes, [0] * len(rows))
        return self._step(rows, hidden, [pre.shape[0] for pre in prefixes])

    @torch.inference_mode()
    def decode(self, rows: list[Row]) -> list[StepOutput]:
        if not rows:
            return []
        toks = [r.state.tracker.last_input()[None] for r in rows]
        hidden = self._forward(rows, toks, [r.kv_len for r in rows])
        return self._step(rows, hidden, [r.kv_len + 1 for r in rows])

    def codec(self, items: list[CodecItem]) -> list[np.ndarray]:
        return self.codec_model.decode(items)

    def release(self, row: Row) -> None:
        if row.slot >= 0 and self._codec is not None:
            self._codec.release_slot(row.slot)
        row.state = None


def _with_ref(req: SynthesisRequest) -> SynthesisRequest:
    """Validation view of a request whose clone codes were injected (no waveform attached)."""
    from dataclasses import replace

    return replace(req, ref_audio=np.zeros(1, dtype=np.float32))
