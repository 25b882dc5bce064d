"""CSM on the real engine and its own checks, with our tiny checkpoint (models/csm/tiny.py, the transformers
layout of sesame/csm-1b): Mimi streamed through codec slots equals one offline decode (fp64); a greedy request
alone equals the same request among 7 others (staggered arrivals, sampled and greedy, other speakers, a voice
clone from codes, a KV pool and slot table small enough to be reused); the release's layout has 538 tensors;
a folder with only the original Sesame weights is refused in one sentence; requests it cannot serve are
refused with a sentence."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from voxcli.models.base import CheckpointError, CodecItem, InputError, SamplingParams, SynthesisRequest

from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.engine import Engine

TARGET = SynthesisRequest(
    text="Hello from a tiny random CSM.", sampling=SamplingParams(greedy=True), max_frames=30
)
ARRIVALS = (0.0, 0.0, 0.05, 0.15, 0.30, 0.35, 0.40, 0.45)  # virtual seconds: four others, the target, three


def _others() -> list[SynthesisRequest]:
    texts = [
        "Hi.",
        "A longer sentence than the others here.",
        "Two words",
        "Yes and no",
        "One",
        "Four more ok",
        "Go",
    ]
    clip = (0.1 * np.sin(np.arange(12000) * 0.05) + 0.02 * np.random.RandomState(5).randn(12000)).astype(
        np.float32
    )
    out = []
    for i, t in enumerate(texts):
        clone = dict(ref_text="my voice", ref_audio=clip, ref_sample_rate=24000) if i == 3 else {}
        out.append(
            SynthesisRequest(
                text=t,
                voice=str(i % 3),
                seed=i,
                sampling=SamplingParams(greedy=i % 2 == 0),
                max_frames=6 + 3 * i,
                **clone,
            )
        )
    return out


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    from voxcli.models.csm.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("csm_engine") / "ckpt")


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    yield


def _engine(ckpt, kv_pages: int, codec_slots: int, executor: str = "cpu") -> Engine:
    from voxcli.models import load_model

    cfg = EngineConfig(
        executor=executor,
        policy="full",
        chunk=ChunkSchedule(first=1, ramp=(2, 4), steady=8),
        kv_pages=kv_pages,
        kv_page_size=8,
        codec_slots=codec_slots,
        max_running=8,
        background_min_batch=2,
        threads=1,
    )
    return Engine(load_model(str(ckpt)), cfg)


def test_mimi_streamed_equals_offline_in_fp64(ckpt):
    from voxcli.models.csm.program import CsmProgram
    from voxcli.models.csm.reference import decode_full

    program = CsmProgram.load(str(ckpt), part_dtypes={"codec": "float64"})
    codes = np.random.RandomState(1).randint(0, 32, size=(40, 32))  # 80 positions at 25 Hz: past the window
    whole = program.codec_model.decode(torch.from_numpy(codes.T[None].copy()))[0, 0].numpy()
    assert np.abs(whole).max() > 0.05 and np.allclose(decode_full(program, codes), whole, atol=1e-6)
    codec = program.codec_model
    codec.init_slots(3)
    other = np.random.RandomState(2).randint(0, 32, size=(40, 32))
    out, pos = [], 0
    for n in (1, 2, 4, 8, 10, 10, 5):  # two requests interleaved in one batch, sharing no state
        items = [
            CodecItem(2, codes[pos : pos + n], first=pos == 0, last=pos + n == 40),
            CodecItem(0, other[pos : pos + n], first=pos == 0, last=pos + n == 40),
        ]
        out.append(codec.decode_chunks(items)[0])
        pos += n
    got = np.concatenate(out)
    assert got.shape == (40 * 1920,) and np.abs(got - whole).max() <= 1e-5


def test_alone_equals_among_seven_others(ckpt):
    eng = _engine(ckpt, kv_pages=64, codec_slots=8)
    alone = eng.submit(TARGET).wait(timeout=300)
    eng.close()

    eng = _engine(ckpt, kv_pages=48, codec_slots=3, executor="sim")  # pages and slots reused
    others = _others()  # the fourth is a voice clone (a context turn from a clip)
    streams = [eng.submit(req, at=ARRIVALS[i]) for i, req in enumerate(others[:4])]
    target = eng.submit(TARGET, at=ARRIVALS[4])
    streams += [eng.submit(req, at=ARRIVALS[5 + i]) for i, req in enumerate(others[4:])]
    eng.run()
    got = target.wait(timeout=0)
    sched = eng.scheduler
    eng.close()
    assert all(s.status == "done" for s in streams), [(s.status, s.reason) for s in streams]
    assert got.shape == alone.shape == (30 * 1920,)
    assert np.abs(alone).max() > 0.05 and np.abs(got - alone).max() <= 1e-4
    assert sched.kv.free == 48 and sched.slots.free == 3


def test_released_layout_has_538_tensors():
    from voxcli.models.csm.tiny import _shapes, config_dict

    shapes = _shapes(config_dict("real"))
    assert len(shapes) == 538  # as transformers.safetensors.index.json of sesame/csm-1b lists them
    tied = "backbone_model.embed_tokens.embed_audio_tokens.weight"
    params = sum(int(np.prod(s)) for k, s in shapes.items() if k != tied)
    assert 1.5e9 < params < 1.8e9  # CSM-1B with its Mimi and text embeddings


def test_original_sesame_layout_is_refused_in_one_sentence(ckpt, tmp_path):
    import shutil

    from safetensors.torch import save_file
    from voxcli.models.csm.program import CsmProgram

    for f in ckpt.iterdir():
        if f.is_file() and not f.name.startswith("transformers"):
            shutil.copy(f, tmp_path / f.name)
    save_file(
        {"backbone.layers.0.attn.q_proj.weight": torch.zeros(2, 2)}, str(tmp_path / "model.safetensors")
    )
    with pytest.raises(
        CheckpointError, match=r"holds only the original Sesame weights .* transformers layout"
    ):
        CsmProgram.load(str(tmp_path))


def test_requests_it_cannot_serve_are_refused_with_a_sentence(ckpt):
    from voxcli.models.csm.program import CsmProgram

    program = CsmProgram.load(str(ckpt))
    bad = [
        (SynthesisRequest(text="hi", voice="12"), "no voice '12'"),
        (SynthesisRequest(text="hi", language="German"), "leave language unset"),
        (SynthesisRequest(text="hi", instructions="calm"), "takes no instructions"),
        (SynthesisRequest(text="hi", ref_text="words"), "needs the reference clip"),
        (
            SynthesisRequest(text="hi", ref_audio=np.zeros(2400, np.float32), ref_sample_rate=24000),
            "--ref-text",
        ),
        (
            SynthesisRequest(
                text="hi", ref_audio=np.zeros(2400, np.float32), ref_sample_rate=0, ref_text="a"
            ),
            "ref_sample_rate",
        ),
        (SynthesisRequest(text="  "), "empty"),
        (SynthesisRequest(text="hi", options={"depth_top_k": -1}), "depth_top_k"),
        (SynthesisRequest(text="hi", sampling=SamplingParams(repetition_penalty=1.2)), "repetition penalty"),
    ]
    for req, msg in bad:
        with pytest.raises(InputError, match=msg):
            program.prepare(req)


def test_a_clip_at_another_rate_is_resampled_not_refused(ckpt):
    """The README's promise (one rule for every family that clones, models/audio/clip.py): a 16 kHz clip
    gives the prompt of the same clip resampled to Mimi's 24 kHz first."""
    from voxcli.models.audio.resample import resample
    from voxcli.models.csm.program import CsmProgram

    program = CsmProgram.load(str(ckpt))
    clip16 = (0.1 * np.sin(np.arange(8000) * 0.07)).astype(np.float32)
    clip24 = resample(torch.from_numpy(clip16), 16000, 24000).numpy()
    at16 = program.prepare(SynthesisRequest(text="hi", ref_audio=clip16, ref_sample_rate=16000, ref_text="a"))
    at24 = program.prepare(SynthesisRequest(text="hi", ref_audio=clip24, ref_sample_rate=24000, ref_text="a"))
    assert at16.data.ids == at24.data.ids
    assert np.array_equal(at16.data.context, at24.data.context)
