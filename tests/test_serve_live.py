"""Text streaming in: the sentence buffer, stdin read as it arrives, the WebSocket endpoint speaking the
first sentence while the rest of the text has not been sent, and the real-time sim's clock."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from voxcli.text import split_sentences
from voxcli.textstream import SentenceBuffer, read_fragments, sentences_from


def test_sentence_buffer_emits_a_sentence_once_something_follows_it():
    buf = SentenceBuffer()
    assert buf.feed("The first sentence is here") == []
    assert buf.feed(".") == []  # could still be "here.com" or "3.14"
    assert buf.feed(" And") == ["The first sentence is here."]
    assert buf.feed(" Dr. Smith said so") == []  # an abbreviation is no sentence end
    assert buf.feed(". ") == ["And Dr. Smith said so."]
    assert buf.finish() == []
    assert buf.chars == len("The first sentence is here. And Dr. Smith said so. ")


@pytest.mark.parametrize("text", ["Hello. How are you?",
                                  "One two three four five. Six. Seven eight nine ten!",
                                  "No terminator at all", "你好。今天天气很好！", "A. B. C. D. E. F. G. H."])
def test_text_given_whole_cuts_like_split_sentences(text):
    assert list(sentences_from([text])) == split_sentences(text)


@pytest.mark.parametrize("text", ["Hello. How are you?", "No terminator at all", "你好。今天天气很好！",
                                  "A. B. C. D. E. F. G. H.", "Yes. No. Maybe so, then. That is fine by me!"])
def test_text_fed_in_pieces_cuts_like_split_sentences(text):
    for step in (1, 3):
        pieces = [text[i:i + step] for i in range(0, len(text), step)]
        assert list(sentences_from(pieces)) == split_sentences(text), step


def test_a_long_sentence_is_spoken_without_waiting_for_a_short_one():
    text = "One two three four five. Six. Seven eight nine ten!"
    pieces = [text[i:i + 4] for i in range(0, len(text), 4)]
    assert list(sentences_from(pieces)) == ["One two three four five.", "Six. Seven eight nine ten!"]
    assert split_sentences(text) == ["One two three four five. Six.", "Seven eight nine ten!"]


def test_stdin_is_read_as_it_arrives_not_at_eof():
    r, w = os.pipe()
    got: list[str] = []
    seen_first = threading.Event()

    def reader() -> None:
        with os.fdopen(r, "r") as stream:
            for s in sentences_from(read_fragments(stream)):
                got.append(s)
                seen_first.set()

    t = threading.Thread(target=reader)
    t.start()
    os.write(w, b"This is the first sentence. And")
    assert seen_first.wait(5), "the first sentence waited for the end of input"
    assert got == ["This is the first sentence."]
    os.write(w, b" then the second one.")
    os.close(w)
    t.join(5)
    assert got == ["This is the first sentence.", "And then the second one."]


def test_realtime_sim_advances_with_the_wall_clock():
    pytest.importorskip("fastapi", reason="the serve extra is not installed")
    from voxcli.models.base import SynthesisRequest

    from voxcli.session import sim_session

    session = sim_session("qwen3-tts-1.7b", "h100")
    engine = session.engine
    try:
        t0 = time.monotonic()
        stream = engine.submit(SynthesisRequest(text="Wall clock.", fixed_frames=40))
        pcm = stream.wait(timeout=30)
        wall = time.monotonic() - t0
        tl = stream.timeline
        assert pcm.size == 40 * 1920
        # 40 decode steps of a simulated H100 take tens of milliseconds of real time, not zero
        assert tl.finished - tl.arrival > 0.04 and wall >= 0.8 * (tl.finished - tl.arrival)
        assert tl.ttfa is not None and 0 < tl.ttfa < 0.5
    finally:
        engine.close()


def test_websocket_speaks_the_first_sentence_before_the_text_ends():
    pytest.importorskip("fastapi", reason="the serve extra is not installed")
    ws_client = pytest.importorskip("websockets.sync.client", reason="websockets is not installed")
    from support.serve_util import running_server, sim_service

    service = sim_service()
    with running_server(service) as url:
        with ws_client.connect(url.replace("http", "ws") + "/v1/audio/speech/live") as ws:
            ws.send(json.dumps({"type": "start", "response_format": "pcm"}))
            for token in ["The first", " sentence", " is", " complete", ".", " And"]:
                ws.send(json.dumps({"type": "text", "text": token}))
            note = json.loads(ws.recv(timeout=10))
            assert note == {"type": "sentence", "index": 0, "text": "The first sentence is complete."}
            audio = ws.recv(timeout=10)
            assert isinstance(audio, bytes) and len(audio) > 0  # speaking; the text has not ended
            ws.send(" the second one follows here.")
            ws.send(json.dumps({"type": "end"}))
            total, notes, done = len(audio), [note], None
            while done is None:
                msg = ws.recv(timeout=20)
                if isinstance(msg, bytes):
                    total += len(msg)
                else:
                    obj = json.loads(msg)
                    if obj["type"] == "done":
                        done = obj
                    else:
                        notes.append(obj)
            assert [n["text"] for n in notes] == ["The first sentence is complete.",
                                                  "And the second one follows here."]
            assert done["sentences"] == 2 and total == 2 * round(done["audio_seconds"] * 24000)


def test_websocket_needs_the_key_and_a_start_message():
    pytest.importorskip("fastapi", reason="the serve extra is not installed")
    ws_client = pytest.importorskip("websockets.sync.client", reason="websockets is not installed")
    from support.serve_util import running_server, sim_service
    from websockets.exceptions import InvalidStatus

    with running_server(sim_service(), api_key="k") as url:
        live = url.replace("http", "ws") + "/v1/audio/speech/live"
        with pytest.raises(InvalidStatus):
            ws_client.connect(live)
        with ws_client.connect(live, additional_headers={"Authorization": "Bearer k"}) as ws:
            ws.send(json.dumps({"type": "start", "speed": 2}))
            err = json.loads(ws.recv(timeout=10))
            assert err["type"] == "error" and err["code"] == 422 and "speed" in err["message"]


def test_speak_live_speaks_a_sentence_before_the_next_one_exists():
    pytest.importorskip("fastapi", reason="the serve extra is not installed")
    from voxcli.models.base import SynthesisRequest

    from voxcli.session import sim_session
    from voxcli.textstream import speak_live

    session = sim_session("qwen3-tts-1.7b", "h100")
    second_sent = threading.Event()

    def requests():
        yield SynthesisRequest(text="First.", fixed_frames=10)
        assert second_sent.wait(10)
        yield SynthesisRequest(text="Second.", fixed_frames=15)

    heard_before_second: list[bool] = []

    def on_audio(pcm) -> None:
        heard_before_second.append(not second_sent.is_set())
        second_sent.set()

    try:
        stats = speak_live(session.engine, requests(), on_audio, 24000)
    finally:
        session.engine.close()
    assert heard_before_second[0] and stats.segments == 2 and stats.samples == 25 * 1920


def test_vox_say_stdin_empty_is_one_sentence(monkeypatch):
    from support.cli_fakes import SPEC, FakeEngine
    from typer.testing import CliRunner

    from voxcli import cli
    from voxcli.session import Session

    monkeypatch.setattr("voxcli.session.engine_factory",
                        lambda cfg: Session(FakeEngine(), SPEC, cfg.model, check=lambda request: None))
    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    r = CliRunner().invoke(cli.app, ["say", "-", "-o", "-"], input=" \n")
    assert r.exit_code == 2 and "the text from standard input is empty" in r.stderr, r.output


def test_websocket_client_leaving_cancels_and_frees_the_engine():
    pytest.importorskip("fastapi", reason="the serve extra is not installed")
    ws_client = pytest.importorskip("websockets.sync.client", reason="websockets is not installed")
    from support.serve_util import running_server, sim_service, wait_until

    service = sim_service()
    sched = service.engine.scheduler
    long_text = "This sentence goes on for a good long while, " * 30 + "and then it ends. "
    with running_server(service) as url:
        with ws_client.connect(url.replace("http", "ws") + "/v1/audio/speech/live") as ws:
            ws.send(json.dumps({"type": "start"}))
            ws.send(long_text)  # no "end": the client just leaves mid-speech
            while not isinstance(ws.recv(timeout=10), bytes):
                pass
            assert sched.kv.used > 0
        def released() -> bool:
            return (sched.kv.free == sched.kv.num_pages and sched.slots.free == sched.slots.num_slots
                    and service.active == 0)

        assert wait_until(released, timeout=3.0)
        assert service.engine.timelines[-1].status == "cancelled"


def test_stdin_that_is_not_utf8_is_one_sentence():
    import io

    from voxcli.text import TextInputError

    stream = io.TextIOWrapper(io.BytesIO("Hello, caf\u00e9. ".encode() + b"bad \xff byte."), encoding="utf-8")
    with pytest.raises(TextInputError) as err:
        list(read_fragments(stream))
    assert str(err.value) == ("standard input is not UTF-8 text (byte 0xff at offset 18); convert it "
                              "(iconv -t utf-8).")
    bom = io.TextIOWrapper(io.BytesIO(b"\xef\xbb\xbfHi there. "), encoding="utf-8")
    assert "".join(read_fragments(bom)) == "Hi there. "
