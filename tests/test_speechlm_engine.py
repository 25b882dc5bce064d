"""ESPnet SpeechLM on the real engine (cpu executor), our own tiny checkpoint (models/speechlm/tiny.py,
the released layout, a tiny X-Codec): batching exactness across phases and the CFG companion's handling.

A greedy CFG request alone vs the same request among 7 others (text phases of different lengths, some
rows in their text phase while others speak, mixed CFG / no CFG, sampled and greedy, staggered arrivals)
with a KV pool and a codec slot table small enough that pages and slots are reused: the waveform must
agree to 1e-4. Also: a text-phase step emits no frame; a CFG request is one width-2 row and a cancelled
one gives every page back; the loader names a missing or mis-shaped tensor and its path.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from voxcli.models.base import CheckpointError, InputError, SamplingParams, SynthesisRequest

from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.engine import Engine

TARGET = SynthesisRequest(text="w1 w2 w3 w4", cfg_scale=3.0, sampling=SamplingParams(greedy=True),
                          max_frames=24)


# virtual arrival times (s): four others, the target, three more
ARRIVALS = (0.0, 0.0, 0.05, 0.15, 0.30, 0.35, 0.40, 0.45)


def _others() -> list[SynthesisRequest]:
    texts = ["w5", "w6 w7 w8 w9 w10 w11", "w12 w13", "w14 w15 w16", "w17", "w18 w19 w20 w21", "w22 w23"]
    return [SynthesisRequest(text=t, cfg_scale=(3.0, 1.0, 2.0)[i % 3], seed=i,
                             sampling=SamplingParams(greedy=i % 2 == 0), max_frames=6 + 3 * i)
            for i, t in enumerate(texts)]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    from voxcli.models.speechlm.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("speechlm_engine") / "ckpt")


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # the tiny model's steps are overhead-bound; comparisons are ours vs ours
    yield


def _engine(ckpt, kv_pages: int, codec_slots: int, batches: list | None = None,
            executor: str = "cpu") -> Engine:
    from voxcli.models import load_model

    program = load_model(str(ckpt))
    if batches is not None:  # every decode batch: (request id, width, phase modality) per row
        inner = program.decode

        def decode(rows):
            batches.append([(r.request_id, r.prompt.width, r.state.phase.modality) for r in rows])
            return inner(rows)

        program.decode = decode
    cfg = EngineConfig(executor=executor, policy="full", chunk=ChunkSchedule(first=10, ramp=(6,), steady=8),
                       kv_pages=kv_pages, kv_page_size=8, codec_slots=codec_slots, max_running=8,
                       background_min_batch=2, threads=1)
    return Engine(program, cfg)


def test_alone_equals_among_seven_others_in_other_phases(ckpt):
    eng = _engine(ckpt, kv_pages=400, codec_slots=8)
    alone = eng.submit(TARGET).wait(timeout=300)
    eng.close()

    # Among others: the real stages on the sim executor, so the arrivals are staggered in virtual time
    # and every batch's composition follows from the clock alone (on the cpu executor it followed from
    # the threads' timing, and the phases met in one step in about half the runs).
    batches: list = []
    eng = _engine(ckpt, kv_pages=260, codec_slots=3, batches=batches, executor="sim")  # reused pages, slots
    others = _others()
    streams = [eng.submit(req, at=ARRIVALS[i]) for i, req in enumerate(others[:4])]
    target = eng.submit(TARGET, at=ARRIVALS[4])
    streams += [eng.submit(req, at=ARRIVALS[5 + i]) for i, req in enumerate(others[4:])]
    eng.run()
    got = target.wait(timeout=0)
    sched = eng.scheduler
    eng.close()
    assert all(s.status == "done" for s in streams), [(s.status, s.reason) for s in streams]
    assert got.shape == alone.shape and got.shape[0] == 24 * 320
    assert np.abs(alone).max() > 0.05 and np.abs(got - alone).max() <= 1e-4
    assert sched.kv.free == 260 and sched.slots.free == 3
    mine = [b for b in batches if any(rid == target.request_id for rid, _, _ in b) and len(b) > 1]
    assert any({w for _, w, _ in b} == {1, 2} for b in mine)  # pairs and single rows in one step
    assert any({m for _, _, m in b} == {"text", "audio"} for b in mine)  # both phases in one step


def test_text_phase_steps_emit_no_frame_and_lead_steps_cover_them(ckpt):
    from support.dia_driver import run_alone
    from voxcli.models import load_model

    program = load_model(str(ckpt))
    prompt = program.prepare(TARGET)
    bound = program.lead_steps(prompt.data.text_tokens)
    assert prompt.lead_steps == bound == 8 - 1 + 16  # no observation yet: the text rules' max_step
    program.init_kv(num_pages=-(-program.kv_tokens(prompt) // 8), page_size=8)
    from voxcli.models.base import Row

    row = Row(request_id=0, prompt=prompt, pages=list(range(program.k_pool.shape[1])))
    outs = [program.prefill([row])[0]]
    while not outs[-1].done:
        outs.append(program.decode([row])[0])
    first = next(i for i, o in enumerate(outs) if o.frame is not None)
    text_steps = row.state.phase.text_steps
    # prefill samples text token 0; the text's eot, then the audio modality pass, then N - 1 delay steps
    assert first == text_steps + 8 - 1 and first <= bound
    assert sum(o.frame is not None for o in outs) == 24 and len(row.state.texts) == 1
    program.release(row)
    # the estimate learns the observed text length per prompt text token
    again = program.prepare(TARGET)
    assert again.lead_steps == 8 - 1 + text_steps == first
    assert np.array_equal(run_alone(program, program.prepare(TARGET), page_size=8).shape, (24, 8))


def test_cfg_request_is_one_row_and_cancel_frees_all(ckpt):
    eng = _engine(ckpt, kv_pages=400, codec_slots=4)
    program = eng.program
    pair = program.prepare(TARGET)
    solo = program.prepare(SynthesisRequest(text=TARGET.text, cfg_scale=1.0, max_frames=24))
    assert pair.width == 2 and solo.width == 1
    assert program.kv_tokens(pair) == 2 * program.kv_tokens(solo)
    s = eng.submit(SynthesisRequest(text=TARGET.text, cfg_scale=3.0, max_frames=200, seed=1))
    next(iter(s))  # after its first chunk: both sequences are running
    s.cancel()
    deadline = time.time() + 30
    while (eng.scheduler.kv.free != 400 or s.status != "cancelled") and time.time() < deadline:
        time.sleep(0.05)
    free = eng.scheduler.kv.free
    eng.close()
    assert s.status == "cancelled" and free == 400


def test_loader_names_the_bad_tensor_and_its_path(ckpt, tmp_path):
    import shutil

    from voxcli.models import load_model

    bad = tmp_path / "bad"
    shutil.copytree(ckpt, bad)
    sd = torch.load(bad / "model.pt", weights_only=True)["module"]
    del sd["model.layers.1.mlp.up_proj.weight"]
    torch.save({"module": sd}, bad / "model.pt")
    with pytest.raises(CheckpointError, match=r"model\.layers\.1\.mlp\.up_proj\.weight.*missing") as e:
        load_model(str(bad))
    assert str(bad / "model.pt") in str(e.value)
    sd["model.layers.1.mlp.up_proj.weight"] = torch.zeros(3, 3)
    torch.save({"module": sd}, bad / "model.pt")
    with pytest.raises(CheckpointError, match=r"up_proj\.weight' has shape \[3, 3\]"):
        load_model(str(bad))


def test_requests_it_cannot_serve_are_refused_with_a_sentence(ckpt):
    from voxcli.models import load_model

    program = load_model(str(ckpt))
    for req, msg in ((SynthesisRequest(text="  "), "text is empty"),
                     (SynthesisRequest(text="w1", voice="Vivian"), "no named voices"),
                     (SynthesisRequest(text="w1", cfg_scale=0.5), "cfg_scale must be"),
                     (SynthesisRequest(text="w1", options={"bogus": 1}),
                      "has no option 'bogus'; its options are max_segments")):
        with pytest.raises(InputError, match=msg):
            program.prepare(req)


def test_shared_pad_prefix_is_exact(ckpt):
    """The companion's all-pad prefix comes from one shared cache instead of its own forward pass: the
    codes are the same as with the forward, and the companion's keys/values agree to float rounding."""
    from support.dia_driver import run_alone
    from voxcli.models import load_model
    from voxcli.models.base import Row

    program = load_model(str(ckpt))
    got = {}
    for share in (False, True):
        program.share_pad_prefix, program._pad_kv = share, None
        got[share] = run_alone(program, program.prepare(TARGET), page_size=8)
        # the companion right after its restart (text plan done, the audio segment's first pass)
        prompt = program.prepare(TARGET)
        program.init_kv(num_pages=-(-program.kv_tokens(prompt) // 8), page_size=8)
        row = Row(request_id=1, prompt=prompt, pages=list(range(program.k_pool.shape[1])))
        program.prefill([row])
        while row.state.phase.modality != "audio" or row.state.phase.uncond_len == 0:
            program.decode([row])
        per, n = row.state.per_seq, row.state.phase.uncond_len
        k = program.k_pool[:, row.pages[per:2 * per]].reshape(program.k_pool.shape[0], -1,
                                                               *program.k_pool.shape[3:])[:, :n]
        got[(share, "k")] = k.clone()
        program.release(row)
    assert np.array_equal(got[False], got[True]) and got[True].shape == (24, 8)
    assert program._pad_kv is not None and program._pad_kv[0].shape[1] >= 64  # one cache, grown once
    assert torch.allclose(got[(False, "k")], got[(True, "k")], atol=1e-5, rtol=0)
