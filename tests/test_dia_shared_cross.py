"""CFG pairs share work (models/dia/shared_cross.py): the unconditional sequences' encoder pass and
cross K/V by text length, layer 0's self-attention within a pair. With the sharing on and off: the
same final hidden states (to float rounding) and the same codes (greedy and seeded sampling) for one
request alone and among others of equal and different lengths, with and without CFG; and the sharing
really happens (one encoder row and one K/V per length, layer 0 on the conditional sequences only)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from dia_driver import run_alone
from voxcli.models.base import Row, SamplingParams, SynthesisRequest

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


def _batch(program, share: bool, steps: int = 60):
    """Prefill + decode the batch of `_requests`; (final hidden states per call, frames per request)."""
    program.share_uncond = share
    prompts = [program.prepare(r) for r in _requests()]
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


def test_alone_equals_among_others_with_sharing(program):
    _, among = _batch(program, share=True)
    reqs = _requests()
    for i in (0, 3, 4, 5):  # a pair of the shared length, one of its own length, no CFG, sampled
        alone = run_alone(program, program.prepare(reqs[i]), page_size=8)
        assert np.array_equal(alone, among[i]), f"request {i}"


def test_one_encoder_row_and_one_cross_kv_per_length(program):
    rows_seen: list[int] = []
    q0: list[int] = []  # sequences layer 0's self-attention runs per call
    enc = program.weights.model.encoder
    hooks = [enc.register_forward_pre_hook(lambda _m, args: rows_seen.append(int(args[0].shape[0]))),
             program.weights.model.decoder.layers[0].self_attention.q_proj.register_forward_pre_hook(
                 lambda _m, args: q0.append(int(args[0].shape[0])))]
    try:
        _batch(program, share=True, steps=2)
        shared, q0_shared = sum(rows_seen), list(q0)
        rows_seen.clear()
        q0.clear()
        _batch(program, share=False, steps=2)
        unshared, q0_unshared = sum(rows_seen), list(q0)
    finally:
        for h in hooks:
            h.remove()
    # 6 requests, 5 with CFG over 3 lengths: 6 conditional rows + 3 shared unconditional ones
    assert (shared, unshared) == (6 + 3, 6 + 5)
    # layer 0's self-attention: the 6 conditional sequences only, not all 11, at prefill and each step
    assert q0_shared == [6] * 3 and q0_unshared == [11] * 3
    _batch(program, share=True, steps=2)
    plans = program._cross_dense  # the last decode batch's, every request still running
    assert all(hasattr(p, "groups") for p in plans)
    groups = plans[0].groups
    assert sorted(idx.numel() for idx, _, _ in groups) == [1, 1, 3]  # texts 0, 1 and 5 share one length
    assert all(k.shape[0] == 1 for _, k, _ in groups)


def test_pairs_without_sharing_use_the_plain_dense_kv(program):
    _batch(program, share=False, steps=2)
    assert all(isinstance(p, tuple) for p in program._cross_dense)
    assert torch.is_tensor(program._cross_dense[0][0])

