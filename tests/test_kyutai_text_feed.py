"""Kyutai TTS reading its text as it arrives, through every front end, on a tiny random checkpoint moshi's own
classes wrote (models/kyutai_tts/tiny.py; the Kyutai oracle venv builds it):

- the engine: a fed request whose text is complete from the start, among 7 others, equals the same text
  submitted whole alone (<= 1e-4); its words arriving one by one over the engine's virtual clock instead
  (the row waits, pads, sits out steps) leave every neighbour's audio as it was (the sim executor running
  the real program: the test is the clock);
- `vox say -`: words read from a pipe are fed as they arrive, one request, the first audio before the
  pipe is closed (the test closes it only once audio came);
- the WebSocket text-in route: one Kyutai request for the whole session, audio before the text ends."""

from __future__ import annotations

import json
import os
import threading

import numpy as np
import pytest
import torch
from oracle.interpreters import oracle_python
from voxcli.models.base import SamplingParams, SynthesisRequest
from voxcli.models.text_feed import TextFeed

from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.engine import Engine

pytestmark = pytest.mark.oracle

TEXT = "Hello world, this is a test."
VOICE = "tiny-default.wav"
WHOLE = SynthesisRequest(text=TEXT, voice=VOICE, sampling=SamplingParams(greedy=True))
FED = SynthesisRequest(text="", voice=VOICE, sampling=SamplingParams(greedy=True), max_frames=120)
ARRIVALS = (0.0, 0.0, 0.05, 0.15, 0.30, 0.35, 0.40, 0.45)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    from voxcli.models.kyutai_tts.tiny import build_tiny

    os.environ.setdefault("VOX_KYUTAI_ORACLE_PYTHON", oracle_python(
        "VOX_KYUTAI_ORACLE_PYTHON", ".oracle-kyutai-venv", "scripts/setup_oracle_kyutai.sh"))
    return build_tiny(tmp_path_factory.mktemp("kyutai_feed") / "ckpt")


@pytest.fixture(scope="module")
def program(ckpt):
    from voxcli.models import load_model

    return load_model(str(ckpt))


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)  # two threads spinning on a loaded 2-core machine run ten times slower
    yield


def _engine(program, executor: str = "sim") -> Engine:
    cfg = EngineConfig(executor=executor, policy="full", chunk=ChunkSchedule(first=1, ramp=(2, 4), steady=8),
                       kv_pages=160, kv_page_size=8, codec_slots=4, max_running=8, background_min_batch=2,
                       threads=1)
    return Engine(program, cfg)


def _others() -> list[SynthesisRequest]:
    texts = ["Hi.", "A longer sentence than the others here.", "Two words", "Yes and no", "One",
             "Four more ok", "Go"]
    return [SynthesisRequest(text=t, voice="tiny-other.wav" if i % 2 else VOICE, seed=i,
                             sampling=SamplingParams(greedy=i % 2 == 0), cfg_scale=(1.0, 2.0, 3.5)[i % 3],
                             options={"padding_between": i % 3}, max_frames=10 + 4 * i)
            for i, t in enumerate(texts)]


def _among_seven(program, submit_target, words_at=()) -> tuple[np.ndarray, list[np.ndarray]]:
    """The target (submitted by `submit_target(engine)` at ARRIVALS[4]) among 7 others on the virtual
    clock; `words_at`: (time, fragment) pairs added to the target's feed, None closing it."""
    eng = _engine(program)
    others = _others()
    streams = [eng.submit(req, at=ARRIVALS[i]) for i, req in enumerate(others[:4])]
    eng.run(until=ARRIVALS[4])
    target = submit_target(eng)
    streams += [eng.submit(req, at=ARRIVALS[5 + i]) for i, req in enumerate(others[4:])]
    for t, fragment in words_at:
        eng.run(until=t)
        fragment[0].add(fragment[1]) if fragment[1] is not None else fragment[0].close()
    eng.run()
    sched = eng.scheduler
    out = target.wait(timeout=0), [s.wait(timeout=0) for s in streams]
    eng.close()
    assert sched.kv.free == sched.kv.num_pages and sched.slots.free == sched.slots.num_slots
    return out


def test_fed_text_complete_from_the_start_equals_the_whole_text_alone_and_among_seven(program):
    eng = _engine(program, executor="cpu")
    alone = eng.submit(WHOLE).wait(timeout=600)
    eng.close()
    assert len(alone) > 20 * 1920 and np.abs(alone).max() > 0.05

    def fed_complete(e: Engine):
        feed = TextFeed()
        feed.add(TEXT)
        feed.close()
        return e.submit(FED, text_feed=feed)

    fed, neighbours = _among_seven(program, fed_complete)
    assert fed.shape == alone.shape and np.abs(fed - alone).max() <= 1e-4

    # the words arriving one by one over the virtual clock (the machine waits and pads between them)
    feed = TextFeed()
    words = [(feed, w + " ") for w in TEXT.split()]
    arriving = [(0.45 + 0.3 * i, w) for i, w in enumerate(words)] + [(0.45 + 0.3 * len(words), (feed, None))]
    streamed, streamed_neighbours = _among_seven(program, lambda e: e.submit(FED, text_feed=feed), arriving)
    assert streamed.size > fed.size and feed.closed  # it waited for its words, padding
    for a, b in zip(neighbours, streamed_neighbours, strict=True):
        assert a.shape == b.shape and np.abs(a - b).max() <= 1e-4  # its waiting changed no neighbour
    assert any(a.size for a in neighbours)


def test_a_kyutai_text_that_stops_arriving_fails_alone_and_frees_its_row(program):
    eng = _engine(program)
    feed = TextFeed(idle_limit_s=1.0)  # on the engine's (virtual) clock, bound at submit
    stream = eng.submit(FED, text_feed=feed)
    other = eng.submit(WHOLE)
    feed.add("Hello ")
    eng.run(until=3.0)
    assert stream.status == "failed" and "no text arrived for" in stream.reason
    eng.run()
    assert other.status == "done" and other.wait(timeout=0).size > 0
    sched = eng.scheduler
    assert sched.kv.free == sched.kv.num_pages and sched.slots.free == sched.slots.num_slots
    eng.close()


def test_vox_say_from_a_pipe_speaks_before_the_pipe_closes(program, ckpt, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from voxcli import cli, session
    from voxcli.textstream import read_fragments, speak_fed

    # what `vox say -` runs for a model that streams text: the pipe's words fed to ONE request
    eng = _engine(program, executor="cpu")
    r, w = os.pipe()
    os.write(w, b"Hello world, this ")
    closed: list[str] = []

    def close(why: str) -> None:
        if not closed:
            closed.append(why)
            os.close(w)

    # only turns a hang into a failure: on a correct engine the first audio closes the pipe
    guard = threading.Timer(300, close, args=("timeout",))
    guard.start()

    def on_audio(pcm) -> None:
        if not closed:
            os.write(w, b"is a test.")
            close("first audio")

    try:
        with os.fdopen(r, "r") as stdin:
            stats = speak_fed(eng, FED, read_fragments(stdin), on_audio, 24000)
    finally:
        guard.cancel()
        eng.close()
    assert closed == ["first audio"], "the first audio waited for the end of the input"
    assert stats.samples > 0 and stats.segments == 1
    assert len(eng.timelines) == 1 and eng.timelines[0].status == "done"

    # and the command itself: piped text is one request (not one per sentence), the flags reach it
    opened: list = []

    def factory(cfg):
        s = session.default_engine_factory(cfg)
        opened.append(s)
        return s

    monkeypatch.setattr(session, "engine_factory", factory)
    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    out = tmp_path / "piped.wav"
    res = CliRunner().invoke(cli.app, ["say", "-m", str(ckpt), "-", "--greedy", "--voice", VOICE,
                                       "--max-frames", "120", "-o", str(out)],
                             input="Hello there. How are you today? Fine.\n")
    assert res.exit_code == 0, res.output
    timelines = list(opened[0].engine.timelines)
    assert len(timelines) == 1 and timelines[0].status == "done" and out.stat().st_size > 44


def test_websocket_text_in_is_one_kyutai_request_fed_as_it_arrives(program):
    pytest.importorskip("fastapi", reason="the serve extra is not installed")
    ws_client = pytest.importorskip("websockets.sync.client", reason="websockets is not installed")
    from support.serve_util import running_server

    from voxcli.engine.admission_check import program_check
    from voxcli.server.service import SpeechService
    from voxcli.session import Session

    eng = _engine(program, executor="cpu")
    service = SpeechService(Session(eng, program.spec, "kyutai-tiny", check=program_check(program)))
    with running_server(service) as url:
        with ws_client.connect(url.replace("http", "ws") + "/v1/audio/speech/live") as ws:
            ws.send(json.dumps({"type": "start", "voice": VOICE, "greedy": True, "max_frames": 120}))
            for token in ["Hel", "lo", " world.", " And"]:  # a sentence end, then the next word's start
                ws.send(json.dumps({"type": "text", "text": token}))
            first = ws.recv(timeout=120)
            assert isinstance(first, bytes) and len(first) > 0  # speaking; the text has not ended
            ws.send(" then some more.")
            ws.send(json.dumps({"type": "end"}))
            total, notes, done = len(first), [], None
            while done is None:
                msg = ws.recv(timeout=120)
                if isinstance(msg, bytes):
                    total += len(msg)
                else:
                    obj = json.loads(msg)
                    done = obj if obj["type"] in ("done", "error") else notes.append(obj)
    assert done["type"] == "done", done
    assert notes == [] and done["sentences"] == 1  # one request for the whole text, no sentence cuts
    assert total == 2 * round(done["audio_seconds"] * 24000)
    timelines = list(eng.timelines)
    assert len(timelines) == 1 and timelines[0].status == "done"
