"""Fixed-shape decode and codec steps of the Qwen3-TTS program for the cuda executor's CUDA graphs.

Each stage object owns static device buffers sized for one batch bucket; `GraphStage(run, load, finish)`
(voxcli/engine/executors/cuda.py) wraps its three methods:

    load(rows)            host: pad the batch to the bucket, fill the static inputs, plan the attention
    run()                 device only, fixed shapes, no host sync: the step itself -> dict of tensors
    finish(rows, host)    host: turn the host copies of run()'s outputs into per-row results

Decode = the code predictor's 15 residual groups for the pending (h, c0), the talker step over the paged
KV pool and the c0 sampling, exactly the arithmetic of `Qwen3TTSProgram.decode` with every
data-dependent Python branch replaced by a `torch.where` that gives the same values. The per-row random
uniforms are drawn in `load` from each request's generator in the eager order, so graphed and eager
decode emit identical codes. Padding rows attend to and write the program's scratch KV page.

Codec = the streaming decoder over [bucket, 16, max_frames] right-padded chunks; each item's slot state is
gathered and scattered inside run() by a static index tensor, padding items use the scratch slot.

Buffers are bound at construction: a CUDA graph captured over them keeps their addresses, so the KV
pool and the codec slot table must be allocated (`init_kv`, `init_codec_slots`) BEFORE the stages are
built, and not reallocated afterwards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ..base import CodecItem, Row, StepOutput
from ..paged_attention import FlashInferPagedDecode, PagedDecodeAttention, make_decode_attention
from .sampling import NEG_INF, BatchSampling, apply_repetition_penalty, warp

if TYPE_CHECKING:
    from .program import Qwen3TTSProgram


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
class DecodeGraphStage:
    """One decode step for `bucket` rows over static buffers."""

    def __init__(self, program: Qwen3TTSProgram, bucket: int, device: torch.device,
                 attention_backend: str = "auto") -> None:
        p, tc = program, program.cfg.talker
        b = tc.block
        self.p, self.bucket, self.device = p, bucket, device
        H, V = b.hidden_size, tc.vocab_size
        kv_tokens = min(p.graph_max_kv_tokens or tc.block.max_position_embeddings,
                        (p.scratch_page) * p.page_size)
        self.attn: PagedDecodeAttention = make_decode_attention(
            bucket, backend=attention_backend, num_qo_heads=b.num_attention_heads,
            num_kv_heads=b.num_key_value_heads, head_dim=b.head_dim, page_size=p.page_size,
            max_pages_per_row=max(1, -(-kv_tokens // p.page_size)), scratch_page=p.scratch_page,
            device=device, dtype=p.dtype)
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

    # -- host --------------------------------------------------------------------------------------
    def load(self, rows: list[Row]) -> None:
        if len(rows) > self.bucket:
            raise ValueError(f"a decode batch of {len(rows)} rows does not fit graph bucket {self.bucket}")
        h = self.s.host
        # Padding rows: greedy, neutral settings, zero inputs; their KV goes to the scratch page.
        for k in ("h", "c0", "text", "seen", "fixed", "q_pos", "top_k", "sub_top_k"):
            h[k].zero_()
        for k in ("penalty", "temperature", "top_p", "sub_temperature", "sub_top_p"):
            h[k].fill_(1.0)
        h["greedy"].fill_(True)
        h["sub_greedy"].fill_(True)
        h["generated"].fill_(2)
        h["uniforms"].fill_(0.5)
        device_rows = []  # rows whose state still lives on the device (straight after prefill)
        for i, r in enumerate(rows):
            st = r.state
            # The same 16 draws per row per step, in the same order, as the eager `_uniforms`.
            h["uniforms"][i] = torch.rand(16, generator=st.gen, dtype=torch.float64)
            sp = st.sampling
            h["greedy"][i], h["temperature"][i], h["top_k"][i], h["top_p"][i] = (
                sp.greedy, sp.temperature, sp.top_k, sp.top_p)
            h["sub_greedy"][i], h["sub_temperature"][i], h["sub_top_k"][i], h["sub_top_p"][i] = (
                sp.sub_greedy, sp.sub_temperature, sp.sub_top_k, sp.sub_top_p)
            h["penalty"][i], h["generated"][i], h["fixed"][i] = sp.repetition_penalty, st.generated, st.fixed
            h["q_pos"][i, 0] = r.kv_len
            if st.h.device.type == "cpu" or self.device.type == "cpu":
                h["h"][i], h["c0"][i], h["seen"][i] = st.h, st.c0, st.seen
            else:
                device_rows.append(i)
        self.s.upload()
        d = self.s.dev
        for i in device_rows:  # device-to-device, ordered on the lane stream after the upload
            st = rows[i].state
            d["h"][i].copy_(st.h, non_blocking=True)
            d["c0"][i].copy_(st.c0, non_blocking=True)
            d["seen"][i].copy_(st.seen, non_blocking=True)
        for i, r in enumerate(rows):  # the text term lives on the device with the prompt
            st = r.state
            t = st.generated - 1
            d["text"][i].copy_(st.trailing[t] if t < st.trailing.shape[0] else st.tts_pad, non_blocking=True)
        self.attn.plan([r.pages for r in rows], [r.kv_len + 1 for r in rows])

    def finish(self, rows: list[Row], host: dict[str, torch.Tensor]) -> list[StepOutput]:
        eos = self.p.cfg.talker.codec_eos_id
        frames = host["frames"].numpy()
        out = []
        for i, r in enumerate(rows):
            st = r.state
            nxt = int(host["nxt"][i])
            # State stays on the host between graphed steps: load() uploads it in one copy per field.
            st.h, st.c0, st.seen = host["hid"][i].clone(), host["nxt"][i].clone(), host["seen"][i].clone()
            st.generated += 1
            r.kv_len += 1
            r.frames_emitted += 1
            done = r.frames_emitted >= st.limit or (not st.fixed and nxt == eos)
            out.append(StepOutput(frame=frames[i].astype(np.int64), done=done))
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
                                      d["fixed"], p.cfg.talker.codec_eos_id, _min_new(), p.suppress)
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
            q, k, v = att._qkv(layer.input_layernorm(x), cos, sin)  # [b, 1, heads, hd]
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
        return att._attend(q, keys, vals, mask)


def _min_new() -> int:
    from .program import MIN_NEW_TOKENS

    return MIN_NEW_TOKENS


# --- codec --------------------------------------------------------------------------------------------
class CodecGraphStage:
    """One codec pass over `bucket` chunks of at most `max_frames` frames each."""

    def __init__(self, program: Qwen3TTSProgram, bucket: int, device: torch.device, max_frames: int) -> None:
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
                                 "limit; raise program.graph_max_chunk_frames before the executor starts "
                                 "(it must cover the largest chunk plus any voice-clone reference)")
            h["codes"][i, :, :n] = torch.from_numpy(np.ascontiguousarray(np.asarray(codes, np.int64).T))
            h["lengths"][i], h["slots"][i], h["fresh"][i] = n, it.slot, it.first
            self._cut.append(cut)
            self._lens.append(n)
        self.s.upload()

    def _with_reference(self, it: CodecItem) -> tuple[np.ndarray, int]:
        """As `Qwen3TTSProgram.codec`: a voice-clone request's first chunk is decoded after its reference
        codes and the reference part of the audio is cut off."""
        ref = self.p._slot_ref.get(it.slot) if it.first else None
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
