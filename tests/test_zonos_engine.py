"""Zonos on the real engine (cpu executor), our own tiny checkpoint: a greedy request alone vs the same
request among 7 others (different texts, languages, voices, conditioning, guidance, sampling and frame
counts, staggered arrivals) with a KV pool and a codec slot table small enough that pages and slots are
reused: the audio must agree to 1e-4; every request is one width-2 row whose pages all come back."""

from __future__ import annotations

import time

import numpy as np
import pytest
from voxcli.models.base import SamplingParams, SynthesisRequest

from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.engine import Engine

TARGET = SynthesisRequest(
    text="The target request says hi.", sampling=SamplingParams(greedy=True), max_frames=30
)


def _others() -> list[SynthesisRequest]:
    texts = [
        "One.",
        "Two, a longer line of text here.",
        "Bonjour tout le monde.",
        "Four is 4.",
        "Five.",
        "Six six six six.",
        "Seven, the last.",
    ]
    langs = [None, "en-gb", "fr-fr", None, "en-us", None, "de"]
    out = []
    for i, t in enumerate(texts):
        out.append(
            SynthesisRequest(
                text=t,
                language=langs[i],
                seed=i,
                cfg_scale=(2.0, 3.0, 1.5)[i % 3],
                voice=("aurora", None, "basalt")[i % 3],
                sampling=SamplingParams(greedy=i % 2 == 0),
                options={"pitch_std": 30.0 + 10 * i, "speaking_rate": 10.0 + i},
                max_frames=8 + 5 * i,
            )
        )
    return out


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    from voxcli.models.zonos.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("zonos_engine") / "ckpt")


def _engine(ckpt, kv_pages: int, codec_slots: int, batches: list | None = None) -> Engine:
    from voxcli.models import load_model

    program = load_model(str(ckpt))
    if batches is not None:
        inner = program.decode

        def decode(rows):
            batches.append([r.request_id for r in rows])
            return inner(rows)

        program.decode = decode
    cfg = EngineConfig(
        executor="cpu",
        policy="full",
        chunk=ChunkSchedule(first=12, ramp=(8,), steady=16),
        kv_pages=kv_pages,
        kv_page_size=8,
        codec_slots=codec_slots,
        max_running=6,
        background_min_batch=2,
        threads=1,
    )
    return Engine(program, cfg)


def test_alone_equals_among_seven_others(ckpt):
    eng = _engine(ckpt, kv_pages=200, codec_slots=8)
    alone = eng.submit(TARGET).wait(timeout=300)
    eng.close()

    batches: list = []
    eng = _engine(ckpt, kv_pages=90, codec_slots=3, batches=batches)  # a few requests' pages: reuse
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
    assert sched.kv.free == 90 and sched.slots.free == 3
    assert any(target.request_id in b and len(b) > 1 for b in batches)  # it really shared decode steps
