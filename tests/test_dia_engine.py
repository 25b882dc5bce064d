"""Dia on the real engine (cpu executor), our own tiny checkpoint: batching exactness and pair handling.

A greedy request alone vs the same request among 7 others (mixed CFG / no CFG, different text and
frame counts, staggered arrivals) with a KV pool and a codec slot table small enough that pages and
slots are reused: the audio must agree to 1e-4. Also: a CFG pair is one row (its KV is freed as one),
and a cancelled pair gives every page back."""

from __future__ import annotations

import time

import numpy as np
import pytest
from voxcli.models.base import SamplingParams, SynthesisRequest

from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.engine import Engine

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


def _engine(ckpt, kv_pages: int, codec_slots: int, batches: list | None = None) -> Engine:
    from voxcli.models import load_model

    program = load_model(str(ckpt))
    if batches is not None:  # record every decode batch: (request id, width) per row
        inner = program.decode

        def decode(rows):
            batches.append([(r.request_id, r.prompt.width) for r in rows])
            return inner(rows)

        program.decode = decode
    cfg = EngineConfig(executor="cpu", policy="full", chunk=ChunkSchedule(first=12, ramp=(8,), steady=16),
                       kv_pages=kv_pages, kv_page_size=8, codec_slots=codec_slots, max_running=6,
                       background_min_batch=2, threads=1)
    return Engine(program, cfg)


def test_alone_equals_among_seven_others(dia_ckpt):
    eng = _engine(dia_ckpt, kv_pages=400, codec_slots=8)
    alone = eng.submit(TARGET).wait(timeout=300)
    eng.close()

    batches: list = []
    eng = _engine(dia_ckpt, kv_pages=150, codec_slots=3, batches=batches)  # a few requests' pages: reuse
    streams = []
    others = _others()
    for i, req in enumerate(others[:4]):
        streams.append(eng.submit(req))
        time.sleep(0.05 * i)
    target = eng.submit(TARGET)
    for req in others[4:]:
        time.sleep(0.05)
        streams.append(eng.submit(req))
    got = target.wait(timeout=300)
    for s in streams:
        s.wait(timeout=300)
    sched = eng.scheduler
    eng.close()
    assert all(s.status == "done" for s in streams), [(s.status, s.reason) for s in streams]
    assert got.shape == alone.shape and got.shape[0] == 30 * 512
    assert np.abs(got - alone).max() <= 1e-4
    assert sched.kv.free == 150 and sched.slots.free == 3
    # the target really shared decode steps with others, pairs and single sequences together
    shared = [b for b in batches if any(rid == target.request_id for rid, _ in b) and len(b) > 1]
    assert shared and any({w for _, w in b} == {1, 2} for b in shared)


def test_pair_is_one_row_and_cancel_frees_all(dia_ckpt):
    eng = _engine(dia_ckpt, kv_pages=400, codec_slots=4)
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
