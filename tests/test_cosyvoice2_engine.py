"""CosyVoice 2 on the real engine (our tiny checkpoint, models/cosyvoice2/tiny.py): a seeded greedy request
alone vs the same request among 7 others (both codec modes, other seeds, sampled and greedy, staggered
arrivals on the sim executor's clock) with a KV pool and a codec slot table small enough that pages and
slots are reused. Every request draws its vocoder noise from its own generator, seeded with its seed, in
upstream's order, so the target's waveform must agree to 1e-4 however the batches fall."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from voxcli.models.base import SamplingParams, SynthesisRequest

from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.engine import Engine

TARGET = SynthesisRequest(text="Hello world. This is a test.", sampling=SamplingParams(greedy=True), seed=5,
                          max_frames=90)
ARRIVALS = (0.0, 0.0, 0.05, 0.15, 0.30, 0.35, 0.40, 0.45)  # virtual s: four others, the target, three more


def _others() -> list[SynthesisRequest]:
    texts = ["Hello.", "This is a test, one two three.", "Say it again.", "Four five.", "Hello world.",
             "Please say it again; one two.", "Tiny."]
    return [SynthesisRequest(text=t, seed=100 + i, sampling=SamplingParams(greedy=i % 2 == 0),
                             max_frames=30 + 15 * i, options={"codec_mode": ("stream", "offline")[i % 2]})
            for i, t in enumerate(texts)]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    from voxcli.models.cosyvoice2.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("cosy2_engine") / "ckpt")


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    yield


def _engine(ckpt, kv_pages: int, codec_slots: int, executor: str) -> Engine:
    from voxcli.models import load_model

    chunk = ChunkSchedule(first=28, ramp=(50,), steady=100)
    cfg = EngineConfig(executor=executor, policy="full", chunk=chunk,
                       kv_pages=kv_pages, kv_page_size=16, codec_slots=codec_slots, max_running=8,
                       background_min_batch=2, threads=1)
    return Engine(load_model(str(ckpt)), cfg)


def test_alone_equals_among_seven_others(ckpt):
    eng = _engine(ckpt, kv_pages=200, codec_slots=8, executor="cpu")
    alone = eng.submit(TARGET).wait(timeout=600)
    eng.close()

    eng = _engine(ckpt, kv_pages=60, codec_slots=3, executor="sim")  # pages and slots are reused
    others = _others()
    streams = [eng.submit(req, at=ARRIVALS[i]) for i, req in enumerate(others[:4])]
    target = eng.submit(TARGET, at=ARRIVALS[4])
    streams += [eng.submit(req, at=ARRIVALS[5 + i]) for i, req in enumerate(others[4:])]
    eng.run()
    got = target.wait(timeout=0)
    sched = eng.scheduler
    eng.close()
    assert all(s.status == "done" for s in streams), [(s.status, s.reason) for s in streams]
    assert got.shape == alone.shape and got.shape[0] >= 60 * 960
    assert np.abs(alone).mean() > 1e-3 and np.abs(got - alone).max() <= 1e-4
    assert sched.kv.free == 60 and sched.slots.free == 3


def test_sft_speakers_voices_and_openai_names(ckpt, tmp_path, monkeypatch):
    """CosyVoice-300M's SFT speakers (an `embedding` each, as its spk2info.pt holds them) speak as upstream's
    inference_sft does (no prompt); `vox voices` lists them and the OpenAI names map to the English ones."""
    import shutil

    from typer.testing import CliRunner
    from voxcli.models import load_model
    from voxcli.models.base import CodecItem, InputError, Row

    from voxcli.server.voices import default_table

    sft = tmp_path / "sft"
    shutil.copytree(ckpt, sft)
    gen = torch.Generator().manual_seed(0)
    torch.save({name: {"embedding": torch.randn(1, 192, generator=gen)} for name in ("英文女", "英文男")},
               sft / "spk2info.pt")
    program = load_model(str(sft))
    assert program.spec.voices == ("英文女", "英文男")
    table = default_table(program.spec.voices)
    assert table["alloy"] == "英文女" and table["onyx"] == "英文男"
    req = SynthesisRequest(text="Hello.", voice="英文男", sampling=SamplingParams(greedy=True), seed=1,
                           max_frames=30)
    prompt = program.prepare(req)
    program.init_kv(num_pages=8, page_size=16)
    program.init_codec_slots(1)
    row = Row(request_id=0, prompt=prompt, pages=list(range(8)))
    row.slot = 0
    outs = [program.prefill([row])[0]]
    while not outs[-1].done:
        outs.append(program.decode([row])[0])
    toks = np.array([[int(o.frame[0])] for o in outs if o.frame is not None])
    wav = program.codec([CodecItem(slot=0, codes=toks, first=True, last=True)])[0]
    assert wav.shape == (len(toks) * 960,) and np.abs(wav).mean() > 1e-3
    with pytest.raises(InputError, match="no voice 'nobody'"):
        program.check(SynthesisRequest(text="Hello.", voice="nobody"))
    from voxcli import cli

    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    r = CliRunner().invoke(cli.app, ["voices", "-m", str(sft)])
    assert r.exit_code == 0 and "英文女" in r.output, r.output
