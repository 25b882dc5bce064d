"""Orpheus 3B on our engine, against its references, with our own tiny checkpoint in the released layout
(models/orpheus/tiny.py: LlamaForCausalLM shards + index, the Llama-3 tokenizer layout with 28,684
`<custom_token_N>`, codec/ = a SNAC folder with weight-norm pairs). Its greedy stream of CALIBRATION_TEXT
stops by itself after >= 25 frames (the builder calibrates the stop token).

Checked against the oracle venv (transformers 5.24 + snac 1.2.1): greedy ids identical to
`LlamaForCausalLM.generate` on the Orpheus prompt; the engine's "whole" waveform <= 1e-4 against the
notebook's whole-utterance `SNAC.decode` (given our seeded noise); the "canopy" waveform <= 1e-4 against
canopyai/Orpheus-TTS's streaming decoder after `torch.manual_seed(seed)` (its own global-RNG noise). Without
the oracle: streaming equals the whole decode for any chunking; frames of seven steps; alone vs among 7
others; the OpenAI voice names through `vox serve`; the errors a bad request or checkpoint gets.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from voxcli.models.base import (
    CheckpointError,
    CodecItem,
    InputError,
    SamplingParams,
    SynthesisRequest,
)

from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.engine import Engine

SEED = 5
CHUNKS = ChunkSchedule(first=4, ramp=(1, 2, 4, 8), steady=16)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    from voxcli.models.orpheus.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("orpheus") / "ckpt")


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    yield


def _target(mode: str = "whole") -> SynthesisRequest:
    from voxcli.models.orpheus.tiny import CALIBRATION_TEXT, CALIBRATION_VOICE

    return SynthesisRequest(
        text=CALIBRATION_TEXT,
        voice=CALIBRATION_VOICE,
        seed=SEED,
        sampling=SamplingParams(greedy=True),
        options={"snac_stream": mode},
    )


def _engine(ckpt, executor: str = "cpu", kv_pages: int = 400, codec_slots: int = 8) -> Engine:
    from voxcli.models import load_model

    cfg = EngineConfig(
        executor=executor,
        policy="full",
        chunk=CHUNKS,
        kv_pages=kv_pages,
        kv_page_size=16,
        codec_slots=codec_slots,
        max_running=8,
        background_min_batch=2,
        threads=1,
    )
    return Engine(load_model(str(ckpt)), cfg)


def _tokens(frames: np.ndarray) -> list[int]:
    from voxcli.models.orpheus.tokens import AUDIO_BASE, CODES, END_OF_SPEECH

    return (frames + AUDIO_BASE + np.arange(7) * CODES).reshape(-1).tolist() + [END_OF_SPEECH]


@pytest.mark.oracle
def test_greedy_ids_and_both_waveforms_equal_the_references(ckpt, tmp_path):
    from oracle.drive_orpheus import run_orpheus_oracle
    from support.dia_driver import run_alone
    from voxcli.models import load_model

    program = load_model(str(ckpt))
    frames = run_alone(program, program.prepare(_target()))
    assert frames.shape[0] >= 25 and (frames > 0).all()  # stopped by itself; no code 0 (canopy drops those)
    eng = _engine(ckpt)
    whole = eng.submit(_target("whole")).wait(timeout=300)
    canopy = eng.submit(_target("canopy")).wait(timeout=300)
    eng.close()
    noise = program.codec_model.whole_noise(frames.shape[0], SEED)
    np.savez(tmp_path / "noise.npz", **{f"block{i}": n for i, n in enumerate(noise)})
    case = {
        "text": _target().text,
        "voice": _target().voice,
        "max_new_tokens": 600,
        "seed": SEED,
        "noise": str(tmp_path / "noise.npz"),
    }
    (tmp_path / "case.json").write_text(json.dumps(case))
    run_orpheus_oracle(str(ckpt), str(tmp_path / "case.json"), str(tmp_path / "ref.npz"))
    ref = np.load(tmp_path / "ref.npz")
    assert ref["prompt"].tolist() == program.prepare(_target()).data.ids
    assert ref["generated"].tolist() == _tokens(frames)
    n = frames.shape[0]
    assert whole.shape == ref["whole"].shape == (n * 2048,)
    assert np.abs(ref["whole"]).max() > 0.05 and np.abs(whole - ref["whole"]).max() <= 1e-4
    assert canopy.shape == ref["canopy"].shape == ((n - 3) * 2048,)
    assert np.abs(canopy - ref["canopy"]).max() <= 1e-4
    # the two rules differ (the canopy windows' edges), as the module doc of codec.py says
    assert np.abs(canopy - whole[2048 : (n - 2) * 2048]).max() > 1e-3


def test_alone_equals_among_seven_others(ckpt):
    eng = _engine(ckpt)
    alone = eng.submit(_target()).wait(timeout=300)
    eng.close()
    voices = ("leah", "jess", "leo", "dan", "mia", "zac", "zoe")
    others = [
        SynthesisRequest(
            text=f"Line {i} <sigh> of the others.",
            voice=voices[i],
            seed=i,
            sampling=SamplingParams(greedy=i % 2 == 0),
            max_frames=5 + 2 * i,
            options={"snac_stream": ("whole", "canopy")[i % 2]},
        )
        for i in range(7)
    ]
    arrivals = (0.0, 0.0, 0.05, 0.15, 0.30, 0.35, 0.40, 0.45)
    # the sim executor: staggered arrivals in virtual time, batches that follow from the clock alone; a
    # small KV pool and slot table so pages and slots are reused
    eng = _engine(ckpt, executor="sim", kv_pages=260, codec_slots=3)
    streams = [eng.submit(r, at=arrivals[i]) for i, r in enumerate(others[:4])]
    target = eng.submit(_target(), at=arrivals[4])
    streams += [eng.submit(r, at=arrivals[5 + i]) for i, r in enumerate(others[4:])]
    eng.run()
    got = target.wait(timeout=0)
    sched = eng.scheduler
    eng.close()
    assert all(s.status == "done" for s in streams), [(s.status, s.reason) for s in streams]
    assert got.shape == alone.shape and got.shape[0] >= 25 * 2048
    assert np.abs(alone).max() > 0.05 and np.abs(got - alone).max() <= 1e-4
    assert sched.kv.free == 260 and sched.slots.free == 3


def test_streaming_equals_the_whole_decode_for_any_chunking(ckpt):
    from voxcli.models.orpheus.codec import OrpheusCodec

    codec = OrpheusCodec.load(ckpt / "codec")
    frames = np.random.RandomState(0).randint(1, 4096, size=(23, 7))
    whole = codec.decode_whole(frames, SEED)
    codec.init_slots(3)
    canopy_ref = None
    for chunks in ([23], [4, 1, 2, 4, 8, 4], [5, 3, 7, 1, 1, 6], [1] * 23):
        for mode in ("whole", "canopy"):
            codec.bind(2, mode, SEED)
            out, a = [], 0
            for n in chunks:
                out.append(codec.decode([CodecItem(2, frames[a : a + n], a == 0, a + n == 23)])[0])
                a += n
            pcm = np.concatenate(out)
            if mode == "whole":
                assert pcm.shape == whole.shape and np.abs(pcm - whole).max() <= 1e-5
            else:
                canopy_ref = pcm if canopy_ref is None else canopy_ref
                assert pcm.shape == ((23 - 3) * 2048,) and np.abs(pcm - canopy_ref).max() <= 1e-5
    assert codec.hold == 3 and codec.cfg.context_samples() == 5636
    # a failed pass leaves the slot as it was: the chunk decodes the same on the next try
    codec.bind(0, "canopy", SEED)
    first = codec.decode([CodecItem(0, frames[:6], True, False)])[0]
    with pytest.raises(ValueError, match="two chunks of the same slot"):
        codec.decode([CodecItem(0, frames[6:8], False, False), CodecItem(0, frames[8:9], False, False)])
    again = codec.decode([CodecItem(0, frames[6:8], False, False)])[0]
    assert np.abs(np.concatenate([first, again]) - canopy_ref[: 5 * 2048]).max() <= 1e-5


def test_a_frame_is_seven_steps_and_the_prompt_is_orpheus_s(ckpt):
    from voxcli.models import load_model
    from voxcli.models.base import Row

    program = load_model(str(ckpt))
    req = SynthesisRequest(text="Hi <laugh> there", voice="Leo", seed=1, max_frames=3)
    prompt = program.prepare(req)
    ids = prompt.data.ids
    text_ids = program.tok.encode("leo: Hi <laugh> there").ids  # the tag stays text, the voice its own name
    assert ids == [128259, *text_ids, 128009, 128260, 128261, 128257] and text_ids[0] == 128000
    assert prompt.steps_per_frame == 7 and program.kv_tokens(prompt) == len(ids) + 7 * 3 + 1
    program.init_kv(8, 16)
    row = Row(request_id=0, prompt=prompt, pages=list(range(8)))
    outs = [program.prefill([row])[0]] + [program.decode([row])[0] for _ in range(20)]
    assert [o.frame is not None for o in outs] == ([False] * 6 + [True]) * 3
    assert outs[-1].done and not any(o.done for o in outs[:-1]) and row.kv_len == len(ids) + 20


def test_bad_requests_and_checkpoints_get_one_sentence(ckpt, tmp_path):
    import shutil

    from voxcli.models import load_model

    program = load_model(str(ckpt))
    with pytest.raises(InputError, match="no voice 'bob'.*tara, leah"):
        program.check(SynthesisRequest(text="hi", voice="bob"))
    with pytest.raises(InputError, match="does not clone voices"):
        program.check(SynthesisRequest(text="hi", ref_audio=np.zeros(10, np.float32), ref_sample_rate=24000))
    with pytest.raises(InputError, match="snac_stream"):
        program.check(SynthesisRequest(text="hi", options={"snac_stream": "fast"}))
    with pytest.raises(InputError, match="text is empty"):
        program.check(SynthesisRequest(text="  "))
    bad = tmp_path / "small"
    shutil.copytree(ckpt, bad)
    cfg = json.loads((bad / "config.json").read_text())
    (bad / "config.json").write_text(json.dumps({**cfg, "vocab_size": 128256}))
    with pytest.raises(CheckpointError, match="vocab_size 128256 cannot hold Orpheus's audio tokens"):
        load_model(str(bad))
    (bad / "config.json").write_text(json.dumps(cfg))
    shutil.rmtree(bad / "codec")
    other = load_model(str(bad))
    with pytest.raises(CheckpointError, match="snac_24khz"):
        other.init_codec_slots(2)


def test_openai_voices_through_vox_serve(ckpt):
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    from support.serve_util import running_server

    from voxcli.server.service import SpeechService
    from voxcli.session import EngineOptions, open_session

    service = SpeechService(open_session(EngineOptions(model=str(ckpt), sets=("max_frames=4",))))
    with running_server(service) as url:
        body = {
            "model": "tts-1",
            "input": "Hello there.",
            "greedy": True,
            "max_frames": 4,
            "response_format": "pcm",
        }
        alloy = httpx.post(f"{url}/v1/audio/speech", json={**body, "voice": "alloy"}, timeout=120)
        tara = httpx.post(f"{url}/v1/audio/speech", json={**body, "voice": "tara"}, timeout=120)
        bob = httpx.post(f"{url}/v1/audio/speech", json={**body, "voice": "bob"}, timeout=120)
        shown = httpx.get(f"{url}/v1/audio/voices").json()
    assert alloy.status_code == tara.status_code == 200, (alloy.text, tara.text)
    assert alloy.content == tara.content and alloy.content  # greedy, SNAC noise seed 0: the same voice
    assert bob.status_code == 400
    assert "tara, leah, jess, leo, dan, mia, zac, zoe" in bob.json()["error"]["message"]
    assert shown["openai_voices"]["alloy"] == "tara" and shown["openai_voices"]["onyx"] == "dan"
