"""VibeVoice on the real engine with the tiny checkpoint transformers' own classes build
(models/vibevoice/hf_build.py, VibeVoice oracle venv): a seeded request alone equals the same request among
7 others (staggered arrivals, other seeds, speakers, guidance off, fewer solver steps; a KV pool small
enough to be reused): its noise comes from its own generator whatever its neighbours, its codec state
from its own row. Requests it cannot serve are refused with a sentence."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support.vibevoice_ckpt import tiny_checkpoint
from voxcli.models.base import InputError, SamplingParams, SynthesisRequest

from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.engine import Engine

pytestmark = pytest.mark.oracle

TARGET = SynthesisRequest(text="Hello from a tiny random VibeVoice.", seed=7, max_frames=24)
ARRIVALS = (0.0, 0.0, 0.05, 0.15, 0.30, 0.35, 0.40, 0.45)  # virtual seconds: four others, the target, three


def _others() -> list[SynthesisRequest]:
    texts = ["Hi.", "A longer sentence than the others here.", "Two words", "Yes and no", "One",
             "Four more ok", "Go"]
    out = []
    for i, t in enumerate(texts):
        extra = {"cfg_scale": 1.0} if i == 2 else {}
        opts = {"diffusion_steps": 4} if i == 5 else {}
        # fixed_frames: random neighbours would end after a frame or two; these stay in the batch
        out.append(SynthesisRequest(text=t, voice=str(i % 4), seed=100 + i, fixed_frames=8 + 3 * i,
                                    options=opts, **extra))
    return out


@pytest.fixture(scope="module")
def ckpt():
    return tiny_checkpoint()


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    yield


def _engine(ckpt, kv_pages: int, executor: str = "cpu") -> Engine:
    from voxcli.models import load_model

    cfg = EngineConfig(executor=executor, policy="full", chunk=ChunkSchedule(first=1, ramp=(2, 4), steady=8),
                       kv_pages=kv_pages, kv_page_size=8, codec_slots=8, max_running=8,
                       background_min_batch=2, threads=1)
    return Engine(load_model(str(ckpt)), cfg)


def test_alone_equals_among_seven_others(ckpt):
    eng = _engine(ckpt, kv_pages=64)
    alone = eng.submit(TARGET).wait(timeout=300)
    eng.close()

    eng = _engine(ckpt, kv_pages=96, executor="sim")
    others = _others()
    streams = [eng.submit(req, at=ARRIVALS[i]) for i, req in enumerate(others[:4])]
    target = eng.submit(TARGET, at=ARRIVALS[4])
    streams += [eng.submit(req, at=ARRIVALS[5 + i]) for i, req in enumerate(others[4:])]
    eng.run()
    got = target.wait(timeout=0)
    sched = eng.scheduler
    eng.close()
    assert all(s.status == "done" for s in streams), [(s.status, s.reason) for s in streams]
    assert got.shape == alone.shape and got.shape[0] > 0 and got.shape[0] % 20 == 0
    assert np.abs(alone).max() > 0.05 and np.abs(got - alone).max() <= 1e-4
    assert sched.kv.free == 96


def test_requests_it_cannot_serve_are_refused_with_a_sentence(ckpt):
    from voxcli.models.vibevoice.program import VibeVoiceProgram

    program = VibeVoiceProgram.load(str(ckpt))
    bad = [
        (SynthesisRequest(text="hi", voice="7"), "no voice '7'"),
        (SynthesisRequest(text="hi", language="German"), "leave language unset"),
        (SynthesisRequest(text="  "), "the text is empty"),
        (SynthesisRequest(text="hi", sampling=SamplingParams(temperature=0.7)), "picks its tokens by argmax"),
        (SynthesisRequest(text="hi", cfg_scale=0.5), "cfg_scale must be"),
        (SynthesisRequest(text="hi", options={"diffusion_steps": 0}), "diffusion_steps"),
        (SynthesisRequest(text="hi", ref_audio=np.zeros(10, np.float32), ref_sample_rate=24000),
         "voice samples are not supported"),
    ]
    for req, msg in bad:
        with pytest.raises(InputError, match=msg):
            program.check(req)
