"""Dia on the real engine (cpu executor), our own tiny checkpoint: batching exactness and pair handling.

A greedy request alone vs the same request among 7 others (mixed CFG / no CFG, different text and
frame counts, staggered arrivals) with a KV pool and a codec slot table small enough that pages and
slots are reused: the audio must agree to 1e-4. Also: a CFG pair is one row (its KV is freed as one),
and a cancelled pair gives every page back."""

from __future__ import annotations

import time

import numpy as np
import pytest
from support.alone_vs_among import alone_vs_among, engine_for
from voxcli.models.base import SamplingParams, SynthesisRequest

TARGET = SynthesisRequest(text="[S1] The target request. [S2] It says hi.", cfg_scale=3.0,
                          sampling=SamplingParams(greedy=True), max_frames=30)


def _others() -> list[SynthesisRequest]:
    texts = ["[S1] One.", "[S2] Two, a longer line of text here.", "[S1] Three (laughs).",
             "[S2] Four is four.", "[S1] Five.", "[S2] Six six six six.", "[S1] Seven, the last."]
    out = []
    for i, t in enumerate(texts):
        out.append(SynthesisRequest(text=t, cfg_scale=(3.0, 1.0, 2.0)[i % 3], seed=i,
                                    sampling=SamplingParams(greedy=i % 2 == 0), max_frames=8 + 5 * i))
    return out


@pytest.fixture(scope="module")
def dia_ckpt(tmp_path_factory):
    from voxcli.models.dia.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("dia_engine") / "ckpt")


def test_alone_equals_among_seven_others(dia_ckpt):
    # a few requests' pages: reuse; every decode batch recorded as (request id, width) per row
    r = alone_vs_among(dia_ckpt, TARGET, _others(), roomy_pages=400, kv_pages=150,
                       row=lambda row: (row.request_id, row.prompt.width))
    assert not r.failures, r.failures
    assert r.got.shape == r.alone.shape and r.got.shape[0] == 30 * 512
    assert np.abs(r.got - r.alone).max() <= 1e-4
    assert r.kv_free == 150 and r.slots_free == 3
    # the target really shared decode steps with others, pairs and single sequences together
    shared = [b for b in r.batches if any(rid == r.target_id for rid, _ in b) and len(b) > 1]
    assert shared and any({w for _, w in b} == {1, 2} for b in shared)


def test_pair_is_one_row_and_cancel_frees_all(dia_ckpt):
    eng = engine_for(dia_ckpt, kv_pages=400, codec_slots=4)
    program = eng.program
    prompt = program.prepare(TARGET)
    solo = program.prepare(SynthesisRequest(text=TARGET.text, cfg_scale=1.0, max_frames=30))
    assert prompt.width == 2 and solo.width == 1
    # the unconditional sequence holds self-attention pages only (its cross-attention is a constant)
    n_self, n_cross = program._layout(prompt)
    assert n_cross > 0
    assert program.kv_tokens(prompt) == program.kv_tokens(solo) + n_self * program.page_size
    s = eng.submit(SynthesisRequest(text=TARGET.text, cfg_scale=3.0, max_frames=200, seed=1))
    next(iter(s))  # after its first chunk: both sequences are running
    s.cancel()
    deadline = time.time() + 30
    while (eng.scheduler.kv.free != 400 or s.status != "cancelled") and time.time() < deadline:
        time.sleep(0.05)
    free = eng.scheduler.kv.free
    eng.close()
    assert s.status == "cancelled" and free == 400
