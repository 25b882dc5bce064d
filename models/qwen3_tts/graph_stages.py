"""Fixed-shape decode and codec steps of the Qwen3-TTS program for the cuda executor's CUDA graphs.

Each stage object owns static device buffers sized for one batch bucket (and the engine's limits,
`ResourceLimits`); `GraphStage` (models/base.py) wraps its methods:

    prime()               host: an all-padding batch (scratch page / slot), before warm-up and capture
    load(rows)            host: pad the batch to the bucket, fill the static inputs, plan the attention
    run()                 device only, fixed shapes, no host sync: the step itself -> dict of tensors
    finish(rows, host)    host: turn the host copies of run()'s outputs into per-row results
    accepts(rows)         whether the fixed shapes hold the batch (else the executor runs it eagerly)
    prepare_next(rows)    decode: the next step's host inputs, while this step runs (see below)

Decode = the code predictor's 15 residual groups for the pending (h, c0), the talker step over the paged
KV pool and the c0 sampling, exactly the arithmetic of `Qwen3TTSProgram.decode` with every
data-dependent Python branch replaced by a `torch.where` that gives the same values. The per-row random
uniforms are drawn in `load` from each request's generator in the eager order, so graphed and eager
decode emit identical codes. Padding rows attend to and write the program's scratch KV page.

Codec = the streaming decoder over [bucket, 16, max_frames] right-padded chunks; each item's slot state is
gathered and scattered inside run() by a static index tensor, padding items use the scratch slot.

Host cost per launch (`python -m benchmarks bench_graph_load`): settings are packed once per request,
page tables converted once per request, uniforms drawn in blocks; a step whose rows are the previous
step's rows in the same order copies that step's host outputs back in one call per field, and
`prepare_next` (called by the executor while the previous step runs on the device) computes the rest of
its host inputs ahead.

Buffers are bound at construction: a CUDA graph captured over them keeps their addresses, so the KV
pool and the codec slot table must be allocated (`init_kv`, `init_codec_slots`) BEFORE the stages are
built, and not reallocated afterwards.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import torch

from ..base import CodecItem, Row, StepOutput
from ..layers import attend
from ..paged_attention import FlashInferPagedDecode, PagedDecodeAttention
from .row_state import MIN_NEW_TOKENS, next_uniforms, peek_uniforms
from .sampling import NEG_INF, BatchSampling, apply_repetition_penalty, warp


class GraphedProgram(Protocol):
    """What the graph stages read of the program that builds them (program.py's Qwen3TTSProgram, whose
    `graph_stage` hook makes them): its weights, pools, device settings and voice-clone slot state."""

    cfg: Any  # Qwen3TTSConfig
    talker: Any  # the talker (with its code predictor)
    codec_model: Any  # the speech tokenizer's decoder (codec.py)
    dtype: torch.dtype
    k_pool: torch.Tensor | None
    v_pool: torch.Tensor | None
    suppress: torch.Tensor  # [V] bool: codec ids never sampled
    scratch_slot: int  # the codec slot graph padding decodes into
    slot_refs: dict[int, np.ndarray]  # a voice-clone slot's reference codes, until its first chunk

    def lane_attention(self, lane: str, device: torch.device, backend: str = "auto") -> Any: ...


# --- sampling without host syncs (same values as sampling.py's eager functions) -----------------------
def draw_static(scores: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """`sampling.draw` with its `if bad.any()` folded into the where (identical result)."""
    probs = scores.float().softmax(dim=-1)
    cdf = probs.cumsum(dim=-1)
    target = (uniforms.to(cdf.device, cdf.dtype) * cdf[:, -1])[:, None]
    idx = torch.searchsorted(cdf, target, right=True).squeeze(1).clamp(max=scores.shape[-1] - 1)
    bad = probs.gather(1, idx[:, None]).squeeze(1) <= 0
    return torch.where(bad, probs.argmax(-1), idx)


def select_static(scores: torch.Tensor, s: BatchSampling, uniforms: torch.Tensor) -> torch.Tensor:
    """`sampling.select` computing both branches: greedy rows still take argmax."""
    return torch.where(s.greedy, scores.argmax(dim=-1), draw_static(warp(scores, s), uniforms))


def talker_scores_static(logits: torch.Tensor, seen: torch.Tensor, penalty: torch.Tensor,
                         generated: torch.Tensor, fixed: torch.Tensor, eos: int, min_new: int,
                         suppress: torch.Tensor) -> torch.Tensor:
    """`talker_masks` + the program's bench-row EOS mask, with both `if any()` branches unconditional."""
    scores = apply_repetition_penalty(logits.float(), seen, penalty).masked_fill(suppress[None, :], NEG_INF)
    blocked = (generated < min_new) | fixed
    scores[:, eos] = torch.where(blocked, torch.full_like(scores[:, eos], NEG_INF), scores[:, eos])
    return scores


def _staging(t: torch.Tensor) -> torch.Tensor:
    """Host buffer `load` writes before one copy to the device buffer (pinned for an async copy).
    On a CPU device the static buffer itself is written."""
    if t.device.type == "cpu":
        return t
    return torch.empty(t.shape, dtype=t.dtype).pin_memory()


class _Static:
    """Named static device tensors, each with its host staging twin."""

    def __init__(self, device: torch.device, **specs: tuple[tuple[int, ...], torch.dtype]) -> None:
        self.dev = {k: torch.zeros(shape, dtype=dt, device=device) for k, (shape, dt) in specs.items()}
        self.host = {k: _staging(t) for k, t in self.dev.items()}

    def upload(self) -> None:
        for k, t in self.dev.items():
            if self.host[k] is not t:
                t.copy_(self.host[k], non_blocking=True)


# --- decode -------------------------------------------------------------------------------------------
# Per-request settings as one float64 row (packed once per request, see RowState.packed); padding values.
_PACKED = ("greedy", "temperature", "top_k", "top_p", "sub_greedy", "sub_temperature", "sub_top_k",
           "sub_top_p", "penalty", "fixed")
_PAD = {"greedy": True, "temperature": 1.0, "top_k": 0, "top_p": 1.0, "sub_greedy": True,
        "sub_temperature": 1.0, "sub_top_k": 0, "sub_top_p": 1.0, "penalty": 1.0, "fixed": False}


def _pages_np(r: Row) -> np.ndarray:
    """The row's page table as an int64 array, converted once per request (the engine reserves a
    request's pages at admission; a new list object is converted again)."""
    st = r.state
    if st.pages is None or st.pages[0] is not r.pages:
        st.pages = (r.pages, np.asarray(r.pages, dtype=np.int64))
    return st.pages[1]


def _pack(st: Any) -> np.ndarray:
    sp = st.sampling
    st.packed = np.array([sp.greedy, sp.temperature, sp.top_k, sp.top_p, sp.sub_greedy, sp.sub_temperature,
                          sp.sub_top_k, sp.sub_top_p, sp.repetition_penalty, st.fixed], dtype=np.float64)
    return st.packed


class DecodeGraphStage:
    """One decode step for `bucket` rows over static buffers."""

    def __init__(self, program: GraphedProgram, bucket: int, device: torch.device,
                 attention_backend: str = "auto", lane: str = "lm") -> None:
        p, tc = program, program.cfg.talker
        b = tc.block
        self.p, self.bucket, self.device = p, bucket, device
        H, V = b.hidden_size, tc.vocab_size
        self.attn: PagedDecodeAttention = p.lane_attention(lane, device, attention_backend)[bucket]
        self.max_kv = self.attn.max_pages * self.attn.page_size  # the engine's per-row bound
        f32, i64 = torch.float32, torch.int64
        self.s = _Static(
            device,
            h=((bucket, H), p.dtype), c0=((bucket,), i64), text=((bucket, H), p.dtype),
            seen=((bucket, V), torch.bool), generated=((bucket,), i64), penalty=((bucket,), f32),
            fixed=((bucket,), torch.bool), uniforms=((bucket, 16), torch.float64), q_pos=((bucket, 1), i64),
            greedy=((bucket,), torch.bool), temperature=((bucket,), f32), top_k=((bucket,), i64),
            top_p=((bucket,), f32), sub_greedy=((bucket,), torch.bool), sub_temperature=((bucket,), f32),
            sub_top_k=((bucket,), i64), sub_top_p=((bucket,), f32))
        d = self.s.dev
        self.talk = BatchSampling(d["greedy"], d["temperature"], d["top_k"], d["top_p"])
        self.sub = BatchSampling(d["sub_greedy"], d["sub_temperature"], d["sub_top_k"], d["sub_top_p"])
        # Outputs are static too: a replay (or an eager rerun standing in for one) must refresh the very
        # tensors the executor copies to its host mirrors after capture.
        self.out = {"frames": torch.zeros(bucket, tc.num_code_groups, dtype=i64, device=device),
                    "hid": torch.zeros(bucket, H, dtype=p.dtype, device=device),
                    "nxt": torch.zeros(bucket, dtype=i64, device=device),
                    "seen": torch.zeros(bucket, V, dtype=torch.bool, device=device)}
        # finish()'s host outputs and the request ids they belong to, for load()'s steady-state fast path
        self._carry: tuple[list[int], torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        self._last_ids: list[int] | None = None  # request ids of the previous load, in order
        self._text_settled = False  # the previous load's rows were all past their trailing text
        # prepare_next()'s work for the next step of the same rows: (ids, generated, q_pos, uniforms,
        # attention arrays); `prepared_hits` counts loads that used it
        self._next: tuple[list[int], np.ndarray, np.ndarray, torch.Tensor, tuple] | None = None
        self.prepared_hits = 0
        # numpy views of the host staging (h and text may be bfloat16, which numpy lacks: torch fills them)
        self._np = {k: t.numpy() for k, t in self.s.host.items() if k not in ("h", "text")}

    # -- host --------------------------------------------------------------------------------------
    def accepts(self, rows: list[Row]) -> bool:
        """Rows past the engine's per-row KV bound (longer than any admitted prompt + frame cap) run
        eagerly instead of failing their batch."""
        return len(rows) <= self.bucket and all(r.kv_len + 1 <= self.max_kv for r in rows)

    def prime(self) -> None:
        """All padding rows (scratch page, length 1, neutral settings): what warm-up and capture run on."""
        self.load([])

    def plan_context(self, context: int) -> None:
        """Every row of the bucket `context` positions deep on its own consecutive pages (GraphStage's
        calibration hook: the attention of a replay then reads that much KV)."""
        per = -(-(context + 1) // self.attn.page_size)
        tables = [list(range(i * per, (i + 1) * per)) for i in range(self.bucket)]
        self.attn.plan(tables, [context + 1] * self.bucket)

    def prepare_next(self, rows: list[Row]) -> None:
        """While this step runs on the device: the next step's host inputs for the same rows (each row
        one frame further), so the next load of exactly these rows only copies them. Nothing is consumed
        (the uniforms are peeked) and no buffer is touched, so a different next batch loses nothing."""
        self._next = None
        if not rows or any(r.kv_len + 2 > self.max_kv for r in rows):
            return  # a row at the KV bound: the next batch is not graphed as is
        states = [r.state for r in rows]
        generated = np.fromiter((st.generated + 1 for st in states), dtype=np.int64, count=len(rows))
        q_pos = np.fromiter((r.kv_len + 1 for r in rows), dtype=np.int64, count=len(rows))
        uniforms = torch.stack([peek_uniforms(st) for st in states])
        attn = self.attn.compute([_pages_np(r) for r in rows], (q_pos + 1).tolist())
        self._next = ([r.request_id for r in rows], generated, q_pos, uniforms, attn)

    def _take_prepared(self, rows: list[Row], ids: list[int]) -> tuple | None:
        """What prepare_next made, if it is for exactly these rows, each one step on."""
        nxt, self._next = self._next, None
        if nxt is None or nxt[0] != ids:
            return None
        if not np.array_equal(nxt[2], np.fromiter((r.kv_len for r in rows), dtype=np.int64, count=len(rows))):
            return None
        return nxt

    def load(self, rows: list[Row]) -> None:
        n = len(rows)
        if n > self.bucket:
            raise ValueError(f"a decode batch of {n} rows does not fit graph bucket {self.bucket}")
        h, a = self.s.host, self._np
        states = [r.state for r in rows]
        ids = [r.request_id for r in rows]
        prepared = self._take_prepared(rows, ids) if n else None
        # The same rows in the same order as this stage's previous load: per-request settings (and a
        # text term that reached its constant tail) are already in place.
        same = ids == self._last_ids
        self._last_ids = ids
        if not same:  # settings never change within a request: packed once, one assignment per field
            packs = np.stack([_pack(st) if st.packed is None else st.packed for st in states]) if n else None
            for j, k in enumerate(_PACKED):
                col = a[k]
                col[n:] = _PAD[k]  # padding rows: greedy, neutral settings, zero inputs, scratch page
                if n:
                    col[:n] = packs[:, j]
            a["generated"][n:] = 2
            a["q_pos"][n:] = 0
            a["uniforms"][n:] = 0.5
            h["h"][n:].zero_()
            h["c0"][n:] = 0
            h["seen"][n:] = False
        if prepared is not None:  # computed while the previous step ran: consume the peeked uniforms
            a["generated"][:n], a["q_pos"][:n, 0] = prepared[1], prepared[2]
            h["uniforms"][:n].copy_(prepared[3])
            for st in states:
                st.uidx += 1
            self.prepared_hits += 1
        elif n:
            a["generated"][:n] = [st.generated for st in states]
            a["q_pos"][:n, 0] = [r.kv_len for r in rows]
            # the same 16 draws per row per step as the eager `_uniforms`
            torch.stack([next_uniforms(st) for st in states], out=h["uniforms"][:n])
        carry = self._carry
        device_rows: list[int] = []
        if n and same and carry is not None and all(
                st.h._base is carry[1] and st.c0._base is carry[2] and st.seen._base is carry[3]
                for st in states):
            # Steady state: the rows' state is still the views finish() gave them: this stage's last
            # host outputs are this step's inputs, one copy per field.
            h["h"][:n].copy_(carry[1])
            h["c0"][:n].copy_(carry[2])
            h["seen"][:n].copy_(carry[3])
        elif n:
            on_host = self.device.type == "cpu" or all(st.h.device.type == "cpu" for st in states)
            if on_host:
                torch.stack([st.h for st in states], out=h["h"][:n])
                torch.stack([st.c0 for st in states], out=h["c0"][:n])
                torch.stack([st.seen for st in states], out=h["seen"][:n])
            else:  # rows straight after prefill keep their state on the device
                for i, st in enumerate(states):
                    if st.h.device.type == "cpu":
                        h["h"][i], h["c0"][i], h["seen"][i] = st.h, st.c0, st.seen
                    else:
                        device_rows.append(i)
        self.s.upload()
        d = self.s.dev
        for i in device_rows:  # device-to-device, ordered on the lane stream after the upload
            st = states[i]
            d["h"][i].copy_(st.h, non_blocking=True)
            d["c0"][i].copy_(st.c0, non_blocking=True)
            d["seen"][i].copy_(st.seen, non_blocking=True)
        if n and not (same and self._text_settled):
            # The text term lives on the device with the prompt: one stacked device-side copy. Once every
            # row is past its trailing text the term is each row's constant tts_pad embedding.
            text = [st.trailing[st.generated - 1] if st.generated - 1 < st.trailing.shape[0] else st.tts_pad
                    for st in states]
            if all(t.device == d["text"].device for t in text):
                torch.stack(text, out=d["text"][:n])
            else:
                d["text"][:n].copy_(torch.stack(text), non_blocking=True)
            self._text_settled = all(st.generated > st.trailing.shape[0] for st in states)
        if prepared is not None:
            self.attn.stage(*prepared[4])
        else:
            self.attn.plan([_pages_np(r) for r in rows], [r.kv_len + 1 for r in rows])

    def finish(self, rows: list[Row], host: dict[str, torch.Tensor]) -> list[StepOutput]:
        eos = self.p.cfg.talker.codec_eos_id
        n = len(rows)
        frames = host["frames"][:n].numpy().astype(np.int64)
        # State stays on the host between graphed steps: one copy of each output per step, rows keep
        # views into it, and load() stacks them back in one call per field.
        hid, nxt_t, seen = host["hid"][:n].clone(), host["nxt"][:n].clone(), host["seen"][:n].clone()
        self._carry = ([r.request_id for r in rows], hid, nxt_t, seen)
        nxt = nxt_t.numpy()
        out = []
        for i, r in enumerate(rows):
            st = r.state
            st.h, st.c0, st.seen = hid[i], nxt_t[i], seen[i]
            st.generated += 1
            r.kv_len += 1
            r.frames_emitted += 1
            done = r.frames_emitted >= st.limit or (not st.fixed and int(nxt[i]) == eos)
            out.append(StepOutput(frame=frames[i], done=done))
        return out

    # -- device ------------------------------------------------------------------------------------
    def run(self) -> dict[str, torch.Tensor]:
        with torch.inference_mode():
            return self._run()

    def _run(self) -> dict[str, torch.Tensor]:
        p, d = self.p, self.s.dev
        talker = p.talker
        u = d["uniforms"]
        c0_emb = talker.codec(d["c0"])
        codes = talker.code_predictor.generate(
            d["h"], c0_emb, lambda g, lg: select_static(lg.float(), self.sub, u[:, g]))
        x = (talker.code_predictor.embed_frame_sum(c0_emb, codes) + d["text"])[:, None].to(p.dtype)
        hid = self._talker_step(x)[:, 0]
        scores = talker_scores_static(talker.codec_head(hid), d["seen"], d["penalty"], d["generated"],
                                      d["fixed"], p.cfg.talker.codec_eos_id, MIN_NEW_TOKENS, p.suppress)
        nxt = select_static(scores, self.talk, u[:, 15])
        o = self.out
        o["frames"].copy_(torch.cat([d["c0"][:, None], codes], dim=1))
        o["hid"].copy_(hid)
        o["nxt"].copy_(nxt)
        o["seen"].copy_(d["seen"].scatter(1, nxt[:, None], True))
        return o

    def _talker_step(self, x: torch.Tensor) -> torch.Tensor:
        """One query per row through every layer, KV appended at the planned page/offset."""
        p, a = self.p, self.attn
        talker = p.talker
        cos, sin = talker.rotary(self.s.dev["q_pos"], x.dtype)
        for i, layer in enumerate(talker.model.layers):
            att = layer.self_attn
            q, k, v = att.project(layer.input_layernorm(x), cos, sin)  # [b, 1, heads, hd]
            kp, vp = p.k_pool[i], p.v_pool[i]
            kp[a.write_page, a.write_offset] = k[:, 0].to(kp.dtype)
            vp[a.write_page, a.write_offset] = v[:, 0].to(vp.dtype)
            if isinstance(a, FlashInferPagedDecode):
                o = a.wrapper.run(q[:, 0].to(kp.dtype), (kp, vp)).to(x.dtype).reshape(self.bucket, 1, -1)
            else:
                o = self._torch_attention(att, q, kp, vp)
            x = layer._mlp(x + att.o_proj(o))
        return talker.model.norm(x)

    def _torch_attention(self, att: Any, q: torch.Tensor, kp: torch.Tensor, vp: torch.Tensor) -> torch.Tensor:
        """SDPA over each row's gathered pages, keys past its length masked: the eager path's math."""
        a = self.attn
        n = a.max_pages * a.page_size
        keys = kp[a.page_table].view(self.bucket, n, a.num_kv_heads, a.head_dim)
        vals = vp[a.page_table].view(self.bucket, n, a.num_kv_heads, a.head_dim)
        mask = (a.positions[None, :] < a.kv_len[:, None])[:, None, None, :]
        return attend(q, keys, vals, mask, scale=att.scale)


# --- codec --------------------------------------------------------------------------------------------
class CodecGraphStage:
    """One codec pass over `bucket` chunks of at most `max_frames` frames each."""

    def __init__(self, program: GraphedProgram, bucket: int, device: torch.device, max_frames: int) -> None:
        self.p, self.bucket, self.max_frames = program, bucket, max_frames
        codec = program.codec_model
        self.codec = codec
        self.spf = codec.samples_per_frame
        self.s = _Static(device, codes=((bucket, codec.cfg.num_quantizers, max_frames), torch.int64),
                         lengths=((bucket,), torch.int64), slots=((bucket,), torch.int64),
                         fresh=((bucket,), torch.bool))
        self.out = {"wav": torch.zeros(bucket, max_frames * self.spf, dtype=torch.float32, device=device)}
        self._cut: list[int] = []  # this batch's per-item audio offsets and frame counts, for finish()
        self._lens: list[int] = []

    def accepts(self, items: list[CodecItem]) -> bool:
        """Whether every chunk (with its voice-clone reference, on a first chunk) fits the fixed shape."""
        return len(items) <= self.bucket and all(
            len(self._with_reference(it)[0]) <= self.max_frames for it in items)

    def prime(self) -> None:
        """All padding items (scratch slot, one frame): what warm-up and capture run on."""
        self.load([])

    def load(self, items: list[CodecItem]) -> None:
        if len(items) > self.bucket:
            raise ValueError(f"a codec batch of {len(items)} chunks does not fit graph bucket {self.bucket}")
        slots = [it.slot for it in items]
        if len(set(slots)) != len(slots):
            raise ValueError(f"a batch must not hold two chunks of the same slot: {slots}")
        h = self.s.host
        h["codes"].zero_()
        h["lengths"].fill_(1)
        h["slots"].fill_(self.p.scratch_slot)
        h["fresh"].fill_(True)
        self._cut, self._lens = [], []
        for i, it in enumerate(items):
            if not 0 <= it.slot < self.p.scratch_slot:
                raise ValueError(f"codec slot {it.slot} is outside the table of {self.p.scratch_slot} slots")
            codes, cut = self._with_reference(it)
            n = self.codec._check_chunk(CodecItem(it.slot, codes, it.first, it.last))
            if n > self.max_frames:
                raise ValueError(f"a codec chunk of {n} frames exceeds this graph's {self.max_frames}-frame "
                                 "limit (the engine's largest chunk, ResourceLimits.max_chunk_frames); such "
                                 "a batch must run eagerly (accepts() says so)")
            h["codes"][i, :, :n] = torch.from_numpy(np.ascontiguousarray(np.asarray(codes, np.int64).T))
            h["lengths"][i], h["slots"][i], h["fresh"][i] = n, it.slot, it.first
            self._cut.append(cut)
            self._lens.append(n)
        self.s.upload()

    def _with_reference(self, it: CodecItem) -> tuple[np.ndarray, int]:
        """As `Qwen3TTSProgram.codec`: a voice-clone request's first chunk is decoded after its reference
        codes and the reference part of the audio is cut off."""
        ref = self.p.slot_refs.get(it.slot) if it.first else None
        if ref is None:
            return np.asarray(it.codes), 0
        return np.concatenate([ref, np.asarray(it.codes)]), ref.shape[0] * self.spf

    def finish(self, items: list[CodecItem], host: dict[str, torch.Tensor]) -> list[np.ndarray]:
        if len(items) != len(self._lens):
            raise RuntimeError(f"finish got {len(items)} chunks but the loaded batch had {len(self._lens)}")
        wav = host["wav"].numpy()
        return [wav[i, cut: n * self.spf].copy() for i, (cut, n) in enumerate(zip(self._cut, self._lens,
                                                                                    strict=True))]

    def run(self) -> dict[str, torch.Tensor]:
        with torch.inference_mode():
            d, table = self.s.dev, self.codec.slots
            st = {}
            for k, t in table.items():
                g = t.index_select(0, d["slots"])
                st[k] = torch.where(d["fresh"].view(-1, *([1] * (g.dim() - 1))), torch.zeros_like(g), g)
            wav, new = self.codec.decoder.stream(d["codes"], d["lengths"], st)
            for k, v in new.items():
                table[k].index_copy_(0, d["slots"], v)
            self.out["wav"].copy_(wav[:, 0])
            return self.out
