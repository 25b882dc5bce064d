"""Kyutai TTS (kyutai/tts-1.6b-en_fr's layout) against moshi 0.2.13 (the Kyutai oracle venv), on a tiny random
checkpoint that moshi's own classes wrote (models/kyutai_tts/moshi_build.py: config.json `model_type` "tts",
the LM with stacked attention, Mimi under moshi's names, a sentencepiece tokenizer, a voice embedding file).

Checked: `vox say --greedy --voice V` equals delayed-streams-modeling's tts_pytorch.py path (moshi
`TTSModel.generate` at temp 0, then Mimi's offline decode of the codes past the audio delay): the same
codes, the same length, the waveform within 1e-4 (the WAV is 16-bit); Mimi (moshi's weight names, the
shared codec) streamed through codec slots equals one offline decode in fp64; a greedy request alone equals
the same request among 7 others on the engine (staggered arrivals, other voices, cfg values, paddings and
sampled rows; a KV pool and slot table small enough to be reused)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import soundfile as sf
import torch
from oracle.interpreters import oracle_python, run_oracle
from typer.testing import CliRunner
from voxcli.models.base import CodecItem, SamplingParams, SynthesisRequest

from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.engine import Engine

pytestmark = pytest.mark.oracle

TEXT = "Hello world, this is a test."
VOICE = "tiny-default.wav"
TARGET = SynthesisRequest(text=TEXT, voice=VOICE, sampling=SamplingParams(greedy=True))
ARRIVALS = (0.0, 0.0, 0.05, 0.15, 0.30, 0.35, 0.40, 0.45)


def _py() -> str:
    return oracle_python("VOX_KYUTAI_ORACLE_PYTHON", ".oracle-kyutai-venv", "scripts/setup_oracle_kyutai.sh")


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    from voxcli.models.kyutai_tts.tiny import build_tiny

    os.environ.setdefault("VOX_KYUTAI_ORACLE_PYTHON", _py())
    return build_tiny(tmp_path_factory.mktemp("kyutai") / "ckpt")


@pytest.fixture(scope="module")
def ref(ckpt, tmp_path_factory):
    out = tmp_path_factory.mktemp("kyutai_ref") / "ref.npz"
    voice = ckpt / "voices" / f"{VOICE}.1e68beda@240.safetensors"
    run_oracle("kyutai_generate.py", str(ckpt), str(voice), TEXT, str(out), "2.0", python=_py())
    return dict(np.load(out))


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)
    yield


def test_vox_say_greedy_equals_moshi_tts(ckpt, ref, tmp_path):
    from voxcli.models.kyutai_tts.program import KyutaiProgram
    from voxcli.models.kyutai_tts.reference import generate_with

    from voxcli.cli import app

    codes = generate_with(KyutaiProgram.load(str(ckpt)), TEXT, voice=VOICE)
    assert ref["end_step"] > 0 and codes.shape == ref["codes"].shape
    np.testing.assert_array_equal(codes, ref["codes"])
    out = tmp_path / "say.wav"
    args = ["say", "-m", str(ckpt), TEXT, "--greedy", "--voice", VOICE, "-o", str(out)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    wav, sr = sf.read(out, dtype="float32")
    assert sr == 24000 and wav.shape == ref["wav"].shape == (len(codes) * 1920,)
    assert 0.05 < np.abs(ref["wav"]).max() < 1.0  # a live decoder the 16-bit WAV holds unclipped
    assert np.abs(wav - ref["wav"]).max() <= 1e-4


def test_mimi_moshi_layout_streamed_equals_offline_in_fp64(ckpt):
    from voxcli.models.kyutai_tts.program import KyutaiProgram
    from voxcli.models.kyutai_tts.reference import decode_full

    codec = KyutaiProgram.load(str(ckpt), part_dtypes={"codec": "float64"}).codec_model
    codes = np.random.RandomState(1).randint(0, 2048, size=(40, 32))  # 80 positions at 25 Hz: past the window
    whole = codec.decode(torch.from_numpy(codes.T[None].copy()))[0, 0].numpy()
    assert np.abs(whole).max() > 0.01
    codec.init_slots(3)
    other = np.random.RandomState(2).randint(0, 2048, size=(40, 32))
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
    assert decode_full  # the reference's offline decode is this codec's `decode`


def _engine(ckpt, kv_pages: int, codec_slots: int, executor: str = "cpu") -> Engine:
    from voxcli.models import load_model

    cfg = EngineConfig(executor=executor, policy="full", chunk=ChunkSchedule(first=1, ramp=(2, 4), steady=8),
                       kv_pages=kv_pages, kv_page_size=8, codec_slots=codec_slots, max_running=8,
                       background_min_batch=2, threads=1)
    return Engine(load_model(str(ckpt)), cfg)


def _others() -> list[SynthesisRequest]:
    texts = ["Hi.", "A longer sentence than the others here.", "Two words", "Yes and no", "One",
             "Four more ok", "Go"]
    return [
        SynthesisRequest(text=t, voice="tiny-other.wav" if i % 2 else VOICE, seed=i,
                         sampling=SamplingParams(greedy=i % 2 == 0), cfg_scale=(1.0, 2.0, 3.5)[i % 3],
                         options={"padding_between": i % 3}, max_frames=10 + 4 * i)
        for i, t in enumerate(texts)
    ]


def test_alone_equals_among_seven_others(ckpt):
    eng = _engine(ckpt, kv_pages=40, codec_slots=8)
    alone = eng.submit(TARGET).wait(timeout=600)
    eng.close()

    eng = _engine(ckpt, kv_pages=120, codec_slots=3, executor="sim")  # pages and slots reused
    others = _others()
    streams = [eng.submit(req, at=ARRIVALS[i]) for i, req in enumerate(others[:4])]
    target = eng.submit(TARGET, at=ARRIVALS[4])
    streams += [eng.submit(req, at=ARRIVALS[5 + i]) for i, req in enumerate(others[4:])]
    eng.run()
    got = target.wait(timeout=0)
    sched = eng.scheduler
    eng.close()
    assert all(s.status == "done" for s in streams), [(s.status, s.reason) for s in streams]
    assert got.shape == alone.shape and len(alone) > 20 * 1920
    assert np.abs(alone).max() > 0.05 and np.abs(got - alone).max() <= 1e-4
    assert sched.kv.free == 120 and sched.slots.free == 3


def _rows(prog, prompts, page: int = 8):
    from voxcli.models.base import Row

    need = [-(-prog.kv_tokens(p) // page) for p in prompts]
    prog.init_kv(sum(need), page)
    rows, start = [], 0
    for i, (p, n) in enumerate(zip(prompts, need, strict=True)):
        rows.append(Row(request_id=i, prompt=p, pages=list(range(start, start + n))))
        start += n
    return rows


def _drive(prog, rows, before_step=None, max_steps: int = 400) -> list[np.ndarray]:
    """All rows stepped together (prefill, then decode) until each is done; `before_step(step)` runs before
    every step (the test's clock: it feeds words). Returns each row's frames."""
    frames: list[list[np.ndarray]] = [[] for _ in rows]
    live = list(range(len(rows)))
    for step in range(max_steps):
        if before_step is not None:
            before_step(step)
        batch = [rows[i] for i in live]
        outs = prog.prefill(batch) if step == 0 else prog.decode(batch)
        for i, o in zip(list(live), outs, strict=True):
            if o.frame is not None:
                frames[i].append(o.frame)
            if o.done:
                live.remove(i)
        if not live:
            return [np.stack(f) for f in frames]
    raise AssertionError("the rows did not end")


def test_streaming_text_feeds_words_as_they_arrive_without_stalling_the_batch(ckpt):
    from voxcli.models.kyutai_tts.program import KyutaiProgram, TextFeed

    prog = KyutaiProgram.load(str(ckpt))
    other = SynthesisRequest(text="Go on then.", voice="tiny-other.wav", sampling=SamplingParams(greedy=True))
    alone = _drive(prog, _rows(prog, [prog.prepare(other)]))[0]
    plain = _drive(prog, _rows(prog, [prog.prepare(TARGET)]))[0]

    # all words there before the first step, the text closed: exactly the plain request
    feed = TextFeed()
    feed.add(TEXT)
    feed.close()
    whole = _drive(prog, _rows(prog, [prog.prepare(TARGET, feed=feed)]))[0]
    np.testing.assert_array_equal(whole, plain)

    # words arriving one every 20 steps (the test's clock), beside a plain request in the same batch
    words = TEXT.split()
    feed = TextFeed()
    req = SynthesisRequest(text="", voice=VOICE, sampling=SamplingParams(greedy=True), max_frames=200)
    rows = _rows(prog, [prog.prepare(req, feed=feed), prog.prepare(other)])
    waited: list[int] = []

    def arrive(step: int) -> None:
        if step % 20 == 0 and step // 20 < len(words):
            feed.add(words[step // 20] + " ")  # a fragment: the space completes the word
            if step // 20 == len(words) - 1:
                feed.close()
        st = rows[0].state
        if st is not None and st.machine.waiting:
            waited.append(step)

    streamed, beside = _drive(prog, rows, arrive)
    assert waited, "the machine never had to wait for a word: the feed was not slow enough to test"
    assert [w for w, _ in rows[0].state.machine.transcript] == words  # every word spoken, in order
    assert len(streamed) > 0
    np.testing.assert_array_equal(beside, alone)  # the waiting row did not disturb its neighbour
