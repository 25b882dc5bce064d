"""`Session.speak`, the one way any front end turns text into audio (voxcli/speak_choice.py): the mode it
chooses for each source and model, the frame cap on every request, the text the model writes reaching
the caller that asked for it, and that no front end speaks around it."""

from __future__ import annotations

import ast
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from voxcli.models.base import InputError, SynthesisRequest, TextEvents, TextWritten

from voxcli.session import Session
from voxcli.speak import RequestTemplate, SpeechFailed, speech_length_cap
from voxcli.speak_choice import Mode, SpeakOptions, choose_mode, frame_cap
from voxcli.text_phase import NoTextPhase

ROOT = Path(__file__).resolve().parents[1]
TWO_SENTENCES = "This is the first sentence here. And this one is the second sentence."
FRAME_RATE = 12.5
DEMO_CAP = speech_length_cap(FRAME_RATE)  # what a demo alias's request without max_frames may run


@dataclass
class _Chunk:
    pcm: np.ndarray


class _Stream:
    def __init__(self, samples: int) -> None:
        self.samples = samples
        self.cancelled = False

    def __iter__(self) -> Any:
        yield _Chunk(np.full(self.samples, 0.1, dtype=np.float32))

    def cancel(self) -> None:
        self.cancelled = True


@dataclass
class _Submit:
    request: SynthesisRequest
    continues: Any
    fed: Any


@dataclass
class _Engine:
    """Records every submit; a program that writes text emits "said: <text>" for each request."""

    takes_text_feed: bool = True
    program: Any = None
    submits: list[_Submit] = field(default_factory=list)
    closed: bool = False

    def submit(self, request: SynthesisRequest, continues: Any = None, text_feed: Any = None) -> _Stream:
        self.submits.append(_Submit(request, continues, text_feed))
        events = getattr(self.program, "text_written", None)
        if events is not None:
            events.emit(TextWritten(request.request_id, f"said: {request.text}"))
        return _Stream(10)

    def close(self) -> None:
        self.closed = True


def _spec(split: bool = True, streams: bool = False) -> Any:
    return SimpleNamespace(sample_rate=24000, frame_rate=FRAME_RATE, split_sentences=split,
                           streams_text=streams)


def _session(engine: _Engine, spec: Any, check: Any = None, model: str = "fake") -> Session:
    return Session(engine=engine, spec=spec, model=model, check=check or (lambda _r: None))


def _pieces(words: list[str]) -> Any:
    yield from words


@pytest.mark.parametrize("source, split, streams, takes_feed, fixed, mode", [
    ("Hello there.", True, False, True, False, Mode.SENTENCES),
    ("Hello there.", False, False, True, False, Mode.WHOLE),  # a dialogue model reads the text at once
    ("Hello there.", True, True, True, False, Mode.SENTENCES),  # a whole text is never fed
    ("Hello there.", True, False, True, True, Mode.WHOLE),  # fixed frames: one unsplit request
    (["Hel", "lo."], True, True, True, False, Mode.FED),  # Kyutai on an Engine
    (["Hel", "lo."], True, True, False, False, Mode.ARRIVING_SENTENCES),  # Kyutai behind a Ray front
    (["Hel", "lo."], True, False, True, False, Mode.ARRIVING_SENTENCES),
    (["Hel", "lo."], False, False, True, False, Mode.WHOLE),
])
def test_the_mode_follows_the_source_the_model_and_the_engine(source, split, streams, takes_feed, fixed,
                                                              mode):
    engine = _Engine(takes_text_feed=takes_feed)
    assert choose_mode(source, _spec(split, streams), engine, fixed) is mode


def test_a_whole_text_is_spoken_sentence_by_sentence_each_capped_and_continuing_the_last():
    engine = _Engine()
    heard: list[np.ndarray] = []
    stats = _session(engine, _spec(), model="demo").speak(TWO_SENTENCES, RequestTemplate(), heard.append)
    first, second = engine.submits
    assert [first.request.text, second.request.text] == ["This is the first sentence here.",
                                                         "And this one is the second sentence."]
    assert [first.request.max_frames, second.request.max_frames] == [DEMO_CAP(first.request.text),
                                                                     DEMO_CAP(second.request.text)]
    assert first.continues is None and second.continues is not None  # admitted once, as one utterance
    assert stats.segments == 2 and stats.samples == 20 and len(heard) == 2


def test_a_frame_count_the_caller_gave_is_kept_and_fixed_frames_is_one_request():
    engine = _Engine()
    session = _session(engine, _spec(), model="demo")
    session.speak(TWO_SENTENCES, RequestTemplate(max_frames=7), lambda _p: None)
    assert [s.request.max_frames for s in engine.submits] == [7, 7]
    engine.submits.clear()
    session.speak(TWO_SENTENCES, RequestTemplate(), lambda _p: None, options=SpeakOptions(fixed_frames=5))
    (only,) = engine.submits
    assert only.request.text == TWO_SENTENCES and only.request.fixed_frames == 5


@pytest.mark.parametrize("model, capped", [("demo", True), ("demo-dia", True), ("qwen3-tts-1.7b", False),
                                           ("Qwen/Qwen3-TTS-12Hz-1.7B-Base", False), ("fake", False)])
def test_the_frame_cap_is_the_demo_aliases_and_decided_when_speaking(model, capped):
    """A demo alias (random weights, rarely stops) gets the cap from its text's length; a real checkpoint
    or a sim recipe none (its end of speech decides). The session carries no cap of its own: every front
    end speaks through `Session.speak`, so the model's name decides it there for all of them."""
    cap = frame_cap(model, _spec())
    assert (cap is not None) is capped
    engine = _Engine()
    _session(engine, _spec(), model=model).speak("Hello there.", RequestTemplate(), lambda _p: None)
    (only,) = engine.submits
    assert only.request.max_frames == (DEMO_CAP("Hello there.") if capped else None)
    assert not hasattr(_session(engine, _spec()), "frame_cap")


def test_a_model_that_reads_whole_texts_gets_an_arriving_text_whole_at_its_end():
    engine = _Engine()
    spoken: list[str] = []
    _session(engine, _spec(split=False)).speak(_pieces(["[S1] Hi. ", "[S2] Hello", " you."]),
                                               RequestTemplate(), lambda _p: None,
                                               options=SpeakOptions(on_sentence=spoken.append))
    (only,) = engine.submits
    assert only.request.text == "[S1] Hi. [S2] Hello you." and spoken == [only.request.text]


def test_an_arriving_text_is_spoken_a_sentence_at_a_time_without_a_feed():
    engine = _Engine(takes_text_feed=False)
    spoken: list[str] = []
    words = ["This is the first ", "sentence here. And this one", " is the second sentence."]
    stats = _session(engine, _spec(streams=True), model="demo").speak(
        _pieces(words), RequestTemplate(), lambda _p: None, options=SpeakOptions(on_sentence=spoken.append))
    assert [s.request.text for s in engine.submits] == spoken == ["This is the first sentence here.",
                                                                 "And this one is the second sentence."]
    assert all(s.fed is None and s.request.max_frames == DEMO_CAP(s.request.text) for s in engine.submits)
    assert stats.segments == 2


def test_an_arriving_text_of_control_characters_only_is_the_senders_error():
    engine = _Engine(takes_text_feed=False)
    with pytest.raises(InputError, match="only control characters"):
        _session(engine, _spec()).speak(_pieces(["\x01\x02 ", "\x1b"]), RequestTemplate(), lambda _p: None)
    assert engine.submits == []


def test_a_model_that_reads_text_as_it_arrives_gets_one_fed_request():
    engine = _Engine()
    stats = _session(engine, _spec(streams=True)).speak(_pieces(["Hel", "lo there."]), RequestTemplate(),
                                                        lambda _p: None)
    (only,) = engine.submits
    assert only.fed is not None and only.request.text == "" and stats.segments == 1


def test_the_text_the_model_writes_reaches_the_caller_that_asked_and_no_other():
    program = SimpleNamespace(text_written=TextEvents())
    engine = _Engine(program=program)
    session = _session(engine, _spec())
    shown: list[str] = []
    session.speak(TWO_SENTENCES, RequestTemplate(), lambda _p: None,
                  options=SpeakOptions(on_text=shown.append))
    assert shown == ["said: This is the first sentence here.", "said: And this one is the second sentence."]
    session.speak("Not followed at all.", RequestTemplate(), lambda _p: None)  # nobody asked: dropped
    assert len(shown) == 2
    other = TextWritten(engine.submits[0].request.request_id, "late")  # a finished utterance is forgotten
    program.text_written.emit(other)
    assert len(shown) == 2


def test_asking_for_the_text_of_a_model_that_writes_none_is_refused_before_speaking():
    engine = _Engine(program=SimpleNamespace(text_written=None))
    session = _session(engine, _spec())
    assert not session.writes_text
    with pytest.raises(NoTextPhase, match="model fake writes no text phase"):
        session.speak("Hello there.", RequestTemplate(), lambda _p: None, options=SpeakOptions(on_text=print))
    assert engine.submits == []


def test_the_models_check_runs_before_any_submit_and_an_engine_error_names_its_sentence():
    engine = _Engine()

    def check(request: SynthesisRequest) -> None:
        if request.voice == "nobody":
            raise InputError("model fake has no voice 'nobody'")

    session = _session(engine, _spec(), check=check)
    with pytest.raises(InputError, match="no voice"):
        session.speak(TWO_SENTENCES, RequestTemplate(voice="nobody"), lambda _p: None)
    with pytest.raises(InputError, match="no voice"):  # an arriving text: checked before it arrives
        session.speak(_pieces(["Hi."]), RequestTemplate(voice="nobody"), lambda _p: None)
    assert engine.submits == []

    def refuse(request: SynthesisRequest, continues: Any = None, text_feed: Any = None) -> Any:
        if continues is not None:
            raise RuntimeError("the engine is closed")
        return _Stream(10)

    engine.submit = refuse  # type: ignore[method-assign]
    with pytest.raises(SpeechFailed, match="sentence 2 of 2: the engine is closed"):
        session.speak(TWO_SENTENCES, RequestTemplate(), lambda _p: None)


def test_a_stopped_caller_starts_no_new_request_and_sees_every_stream():
    engine = _Engine()
    stop = threading.Event()
    seen: list[Any] = []

    def audio(_pcm: np.ndarray) -> None:
        stop.set()  # the listener leaves after the first chunk

    with pytest.raises(Exception) as caught:
        _session(engine, _spec()).speak(TWO_SENTENCES, RequestTemplate(), audio, stop,
                                        SpeakOptions(on_stream=seen.append))
    assert type(caught.value).__name__ == "Stopped"
    assert len(seen) == len(engine.submits) >= 1
    assert all(s.cancelled for s in seen[1:])  # the next sentence, already submitted, is cancelled


def test_closing_a_session_closes_its_engine():
    engine = _Engine()
    _session(engine, _spec()).close()
    assert engine.closed


# Front ends speak only through Session.speak: none submits speech to an engine or runs a speaking loop
# itself. (Transcription, audio in and text out, submits its own requests: `vox transcribe` and
# /v1/audio/transcriptions hear, they do not speak.)
FRONT_ENDS = ["voxcli/cli_speech.py", "voxcli/api.py", "voxcli/batch.py", "voxcli/server/service.py",
              "voxcli/server/live.py", "voxcli/server/routes.py", "voxcli/cluster/ray_front.py",
              "voxcli/cluster/ray_app.py"]
SPEAKING_LOOPS = {"speak", "speak_live", "speak_fed", "segment_requests", "speak_source", "speak_prepared"}


def _speech_bypasses(path: Path, exempt: frozenset[str] = frozenset()) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    skipped = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
               and f.name in exempt for n in ast.walk(f)}
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module in ("voxcli.speak", "voxcli.textstream",
                                                                "voxcli.speak_choice"):
            found += [f"imports {a.name}" for a in node.names if a.name in SPEAKING_LOOPS]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "submit":
            receiver = ast.unparse(node.func.value)
            if receiver.endswith("engine"):
                found.append(f"{receiver}.submit at line {node.lineno}")
    return found


@pytest.mark.parametrize("front_end", FRONT_ENDS)
def test_no_front_end_speaks_around_the_session(front_end):
    assert _speech_bypasses(ROOT / front_end) == []


def test_vox_reply_speaks_through_the_session_while_transcription_submits_its_own():
    path = ROOT / "voxcli/cli_transcribe.py"
    assert _speech_bypasses(path, exempt=frozenset({"transcribe"})) == []
    assert _speech_bypasses(path) != []  # the structural check does see a submit where there is one


def test_vox_say_help_groups_its_flags_in_panels():
    from typer.testing import CliRunner

    from voxcli import cli

    result = CliRunner().invoke(cli.app, ["say", "--help"], env={"COLUMNS": "120", "TERM": "xterm"})
    assert result.exit_code == 0, result.output
    panels: dict[str, str] = {}
    for block in result.stdout.split("╭─")[1:]:
        title, _, body = block.partition("\n")
        panels[title.strip(" ─╮")] = body.split("╰")[0]  # the panel's rows, not what follows it
    assert {"Voice", "Sampling", "Output", "Engine"} <= set(panels), list(panels)
    expected = {"Voice": ["--voice", "--lang", "--ref-audio"], "Sampling": ["--seed", "--temperature"],
                "Output": ["--output", "--format", "--show-text"],
                "Engine": ["--policy", "--executor", "--set", "--dtype"]}
    for panel, flags in expected.items():
        for flag in flags:
            assert flag in panels[panel], (panel, flag)
    assert "--voice" not in panels["Engine"] and "--policy" not in panels["Voice"]
