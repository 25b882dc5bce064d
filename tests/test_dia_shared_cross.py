"""CFG pairs share work (models/dia/shared_cross.py): the unconditional sequences' cross-attention is
one constant per layer (no encoder pass, no cross pages), layer 0's self-attention is reused within a
pair. With the sharing on and off: the same final hidden states (to float rounding) and the same codes
(greedy and seeded sampling) for one request alone and among others of equal and different lengths,
with and without CFG; and the sharing really happens (the encoder and every layer's cross-attention on
the conditional sequences only, layer 0's self-attention too, fewer pages)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support.dia_driver import run_alone
from voxcli.models.base import Row, SamplingParams, SynthesisRequest
from voxcli.models.dia.shared_cross import uncond_constants

GREEDY = SamplingParams(greedy=True)
TEXTS = ["[S1] Same length one.", "[S2] Same length two.", "[S1] A longer line of text here.", "[S2] Hi."]


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    from voxcli.models import load_model
    from voxcli.models.dia.tiny import build_tiny

    return load_model(str(build_tiny(tmp_path_factory.mktemp("dia_shared") / "ckpt", codec=False)))


def _requests() -> list[SynthesisRequest]:
    # texts 0 and 1 have one length (their pairs share), 2 and 3 others; one request without CFG
    assert len(TEXTS[0]) == len(TEXTS[1]) and len({len(t) for t in TEXTS}) == 3
    out = [SynthesisRequest(text=t, cfg_scale=3.0, sampling=GREEDY, max_frames=6 + 2 * i)
           for i, t in enumerate(TEXTS)]
    out.append(SynthesisRequest(text=TEXTS[0], cfg_scale=1.0, sampling=GREEDY, max_frames=9))
    out.append(SynthesisRequest(text=TEXTS[1], cfg_scale=2.0, seed=3, max_frames=11))  # sampled
    return out


def _batch(program, share: bool, steps: int = 60, make=None):
    """Prefill + decode the batch of `_requests` (or of `make(program)`'s prompts); (final hidden states
    per call, frames per request)."""
    program.share_uncond = share
    prompts = make(program) if make else [program.prepare(r) for r in _requests()]
    program.init_kv(1, 8)
    need = [-(-program.kv_tokens(p) // 8) for p in prompts]
    program.init_kv(sum(need), 8)
    rows, start = [], 0
    for i, (p, k) in enumerate(zip(prompts, need, strict=True)):
        rows.append(Row(i, p, list(range(start, start + k))))
        start += k
    hidden, inner = [], program._step

    def step(rs, hid, kv):
        hidden.append(hid.clone())
        return inner(rs, hid, kv)

    program._step = step
    try:
        frames: list[list[np.ndarray]] = [[] for _ in rows]
        live = list(range(len(rows)))
        outs = program.prefill(rows)
        for _ in range(steps):
            for i, o in zip(live, outs, strict=True):
                if o.frame is not None:
                    frames[i].append(o.frame)
            live = [i for i, o in zip(live, outs, strict=True) if not o.done]
            if not live:
                break
            outs = program.decode([rows[i] for i in live])
    finally:
        del program._step
        program.share_uncond = True
    return hidden, [np.stack(f) if f else np.zeros((0, 9), dtype=np.int64) for f in frames]


def test_sharing_keeps_hidden_states_and_codes(program):
    off_hidden, off_frames = _batch(program, share=False)
    on_hidden, on_frames = _batch(program, share=True)
    assert len(on_hidden) == len(off_hidden) > 25
    for a, b in zip(on_hidden, off_hidden, strict=True):
        assert a.shape == b.shape
        assert float((a - b).abs().max()) <= 1e-5 * max(1.0, float(b.abs().max()))
    for a, b in zip(on_frames, off_frames, strict=True):
        assert a.shape[0] > 0 and np.array_equal(a, b)


def test_sharing_with_a_voice_clone_prefix(program):
    """A clone's prefix makes prefill's query length > 1, then decode's is 1, over the same cached cross
    plan (own sequences of different text lengths: a mask per query length)."""
    codes = np.random.default_rng(4).integers(0, 1024, size=(5, 9))

    def make(p):
        clone = SynthesisRequest(text=TEXTS[2], ref_text="[S1] Ref.", cfg_scale=3.0, sampling=GREEDY,
                                 max_frames=8)
        return [p.prepare(clone, ref_codes=codes),
                p.prepare(SynthesisRequest(text=TEXTS[3], cfg_scale=3.0, sampling=GREEDY, max_frames=7))]

    off_hidden, off_frames = _batch(program, share=False, make=make)
    on_hidden, on_frames = _batch(program, share=True, make=make)
    assert on_hidden[0].shape == off_hidden[0].shape
    for a, b in zip(on_hidden, off_hidden, strict=True):
        assert float((a - b).abs().max()) <= 1e-5 * max(1.0, float(b.abs().max()))
    for a, b in zip(on_frames, off_frames, strict=True):
        assert a.shape[0] > 0 and np.array_equal(a, b)


def test_alone_equals_among_others_with_sharing(program):
    _, among = _batch(program, share=True)
    reqs = _requests()
    for i in (0, 3, 4, 5):  # a pair of the shared length, one of its own length, no CFG, sampled
        alone = run_alone(program, program.prepare(reqs[i]), page_size=8)
        assert np.array_equal(alone, among[i]), f"request {i}"


def test_shared_unconditional_sequences_skip_encoder_and_cross_attention(program):
    rows_seen: list[int] = []  # encoder rows per call
    q0: list[int] = []  # sequences layer 0's self-attention runs per call
    cq: list[int] = []  # sequences every layer's cross-attention query projection runs per call
    program._uncond_c = uncond_constants(program.weights)  # once per program, before the hooks
    w = program.weights.model
    hooks = [w.encoder.register_forward_pre_hook(lambda _m, args: rows_seen.append(int(args[0].shape[0]))),
             w.decoder.layers[0].self_attention.q_proj.register_forward_pre_hook(
                 lambda _m, args: q0.append(int(args[0].shape[0])))]
    hooks += [layer.cross_attention.q_proj.register_forward_pre_hook(
        lambda _m, args: cq.append(int(args[0].shape[0]))) for layer in w.decoder.layers]
    counts = {}
    try:
        for share in (True, False):
            _batch(program, share=share, steps=2)
            counts[share] = (sum(rows_seen), list(q0), list(cq))
            for seen in (rows_seen, q0, cq):
                seen.clear()
    finally:
        for h in hooks:
            h.remove()
    layers = len(w.decoder.layers)
    # 6 requests, 5 with CFG: only the 6 conditional sequences run the encoder when shared (its
    # unconditional output is a constant), all 11 when not
    assert (counts[True][0], counts[False][0]) == (6, 11)
    # layer 0's self-attention and every layer's cross-attention query: the 6 own sequences, not all 11,
    # at prefill and each step
    assert counts[True][1] == [6] * 3 and counts[False][1] == [11] * 3
    assert counts[True][2] == [6] * (3 * layers) and counts[False][2] == [11] * (3 * layers)
    _batch(program, share=True, steps=2)
    plans = program._cross_dense  # the last decode batch's, every request still running
    assert [p.n_own for p in plans] == [6] * layers  # conditional + width 1, ordered first
    assert all(p.own_k.shape[0] == 6 for p in plans)


def test_shared_unconditional_sequences_hold_no_cross_pages(program):
    from voxcli.models.dia.program import DiaProgram

    program.init_kv(1, 8)
    prompt = program.prepare(SynthesisRequest(text=TEXTS[2], cfg_scale=3.0, max_frames=20))
    plain = program.prepare(SynthesisRequest(text=TEXTS[2], cfg_scale=1.0, max_frames=20))
    n_self, n_cross = program._layout(prompt)
    assert n_cross > 0
    try:
        program.share_uncond = False
        assert program.kv_tokens(prompt) == 2 * (n_self + n_cross) * 8
        program.share_uncond = True
        assert program.kv_tokens(prompt) == (2 * n_self + n_cross) * 8
        assert program.kv_tokens(plain) == (n_self + n_cross) * 8
    finally:
        program.share_uncond = DiaProgram.share_uncond


def test_unconditional_cross_attention_is_one_constant_per_layer(program):
    """Identity 2 of shared_cross.py against the reference computation: the encoder over L zeros (any
    L), each layer's cross K/V of it, attention of random queries, o_proj -> c_l for every query."""
    from voxcli.models.dia.layers import attend

    constants = uncond_constants(program.weights)
    w = program.weights.model
    gen = torch.Generator().manual_seed(5)
    with torch.inference_mode():
        for L in (1, 2, 9, 40):
            enc = w.encoder(torch.zeros(1, L, dtype=torch.long), None)
            for layer, c_l in zip(w.decoder.layers, constants, strict=True):
                c = layer.cross_attention
                k, v = layer.cross_kv(enc)
                q = torch.randn(3, 2, c.heads, c.head_dim, generator=gen) * 4
                ref = c.o_proj(attend(q, k.expand(3, -1, -1, -1), v.expand(3, -1, -1, -1), None))
                assert float((ref - c_l).abs().max()) <= 1e-5 * max(1.0, float(c_l.abs().max())), L


def test_pairs_without_sharing_use_the_plain_dense_kv(program):
    _batch(program, share=False, steps=2)
    assert all(isinstance(p, tuple) for p in program._cross_dense)
    assert torch.is_tensor(program._cross_dense[0][0])

