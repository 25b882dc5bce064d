"""Unit tests of the CLI's parts: text input and splitting, batch parsing, audio sinks, the player's
jitter buffer, and sentence streaming through an engine."""

from __future__ import annotations

import io
import json
import struct
import threading
import time

import numpy as np
import pytest
import soundfile as sf
from support.cli_fakes import SR, FakeDevice, FakeEngine

from voxcli.audio import AudioOutputError, FileSink, StreamSink, resolve_format, to_int16
from voxcli.playback import Player
from voxcli.speak import RequestTemplate, SpeechFailed, Stopped, speak
from voxcli.text import TextInputError, parse_batch_lines, read_batch_inputs, read_say_text, split_sentences

# --- text -----------------------------------------------------------------------------------------


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_say_text_sources(tmp_path):
    assert read_say_text("Hello.", stdin=_Tty("")) == "Hello."
    assert read_say_text("-", stdin=io.StringIO("  piped text \n")) == "piped text"
    assert read_say_text(None, stdin=io.StringIO("not a tty")) == "not a tty"
    f = tmp_path / "t.txt"
    f.write_text("from file\n")
    assert read_say_text(None, stdin=_Tty(""), text_file=f) == "from file"
    with pytest.raises(TextInputError, match="no text to say"):
        read_say_text(None, stdin=_Tty(""))  # a terminal and no text: never wait silently
    with pytest.raises(TextInputError, match="empty"):
        read_say_text("-", stdin=io.StringIO(" \n\t"))
    with pytest.raises(TextInputError, match="does not exist"):
        read_say_text(None, stdin=_Tty(""), text_file=tmp_path / "missing.txt")
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(TextInputError, match="not UTF-8"):
        read_say_text(None, stdin=_Tty(""), text_file=bad)


def test_split_sentences_keeps_every_word_in_order():
    text = ("Dr. Smith arrived at 5 p.m. today. He said: \"Hello!\" Then he left?  Yes. "
            "The end\nof the story.")
    parts = split_sentences(text, min_chars=1)
    assert parts == ["Dr. Smith arrived at 5 p.m. today.", "He said: \"Hello!\"", "Then he left?", "Yes.",
                     "The end of the story."]
    assert " ".join(parts).split() == text.split()
    # short ones are merged with a neighbour by default
    assert "Yes." not in split_sentences(text)
    assert split_sentences("你好。今天天气很好！") == ["你好。今天天气很好！"]
    assert split_sentences("你好。今天天气很好！", min_chars=1) == ["你好。", "今天天气很好！"]


def test_split_sentences_bounds_long_sentences():
    long = ", ".join(f"clause number {i} goes on" for i in range(40)) + "."
    parts = split_sentences(long, max_chars=100)
    assert len(parts) > 5 and all(len(p) <= 100 for p in parts)
    assert " ".join(parts).split() == long.split()
    assert all(len(p) <= 50 for p in split_sentences("x" * 120, max_chars=50))


def test_batch_lines_mixed_formats():
    lines = ["id\ttext", "plain line", "", "greet\tHello\tthere",
             '{"id": "j1", "text": "Hi", "voice": "bob"}', '{"text": "no id"}', "{broken json",
             '{"text": "x", "colour": "red"}', '{"id": "../evil/x", "text": "y"}', '{"text": 5}']
    items = parse_batch_lines(lines, "in.txt")
    by_id = {i.id: i for i in items}
    assert [i.id for i in items] == ["0002", "0003", "greet", "j1", "0006", "0007", "0008", "evil_x", "0010"]
    assert by_id["0002"].text == "plain line" and by_id["0002"].error is None
    assert "in.txt:3 is empty" in by_id["0003"].error
    assert by_id["greet"].text == "Hello\tthere"
    assert by_id["j1"].voice == "bob" and by_id["j1"].error is None
    assert "not valid JSON" in by_id["0007"].error
    assert "unknown field(s) colour" in by_id["0008"].error
    assert by_id["evil_x"].error is None  # path separators never reach the file name
    assert '"text" string' in by_id["0010"].error


def test_batch_inputs_duplicates_and_prefixes(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.tsv"
    a.write_text("one\ntwo\n")
    b.write_text("x\tfirst\nx\tsecond\n")
    items = read_batch_inputs([str(a), str(b)])
    # the repeated id fails under a key of its own, so its record never replaces the first line's
    assert [i.id for i in items] == ["a-0001", "a-0002", "x", "x@b.tsv:2"]
    assert items[3].error and f"already used by {b}:1" in items[3].error
    c = tmp_path / "c.tsv"
    c.write_text("a/b\tone\na_b\ttwo\n")  # ids that sanitise to one file name
    items = read_batch_inputs([str(c)])
    assert [i.id for i in items] == ["a_b", "a_b@c.tsv:2"] and items[0].error is None and items[1].error
    with pytest.raises(TextInputError, match="no lines"):
        read_batch_inputs(["-"], stdin=io.StringIO(""))
    with pytest.raises(TextInputError, match="does not exist"):
        read_batch_inputs([str(tmp_path / "nope.txt")])


# --- audio sinks ------------------------------------------------------------------------------------


def _tone(n: int) -> np.ndarray:
    return (0.5 * np.sin(np.arange(n) / 7.0)).astype(np.float32)


class _Pipe(io.RawIOBase):
    def __init__(self) -> None:
        self.data = bytearray()

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        self.data += b
        return len(b)


def test_file_sink_is_atomic_and_progressive(tmp_path):
    path = tmp_path / "sub" / "x.wav"
    sink = FileSink(path, SR, "wav")
    sink.write(_tone(2400))
    assert not path.exists() and sink.part.stat().st_size > 44  # audio on disk while streaming
    sink.write(_tone(2400))
    sink.close()
    assert path.exists() and not sink.part.exists()
    data, sr = sf.read(path, dtype="float32")
    assert sr == SR and len(data) == 4800
    np.testing.assert_allclose(data[:2400], _tone(2400), atol=1 / 32767 + 1e-6)
    aborted = FileSink(tmp_path / "y.flac", SR, "flac")
    aborted.write(_tone(100))
    aborted.abort()
    assert list(tmp_path.glob("y.flac*")) == []


@pytest.mark.parametrize("fmt", ["flac", "pcm"])
def test_file_sink_formats(tmp_path, fmt):
    sink = FileSink(tmp_path / f"x.{fmt}", SR, fmt)
    sink.write(_tone(1000))
    sink.close()
    if fmt == "pcm":
        assert (tmp_path / "x.pcm").stat().st_size == 2000  # headerless: exactly 2 bytes per sample
    else:
        assert sf.info(str(tmp_path / "x.flac")).format == "FLAC"


def test_stream_sink_unknown_length_wav_and_raw():
    pipe = _Pipe()
    sink = StreamSink(pipe, SR, "wav")
    sink.write(_tone(3000))
    sink.close()
    assert struct.unpack("<I", pipe.data[40:44])[0] == 0xFFFFFFFF  # length unknown while streaming
    data, sr = sf.read(io.BytesIO(bytes(pipe.data)), dtype="float32")
    assert sr == SR and len(data) == 3000
    seekable = io.BytesIO()
    sink = StreamSink(seekable, SR, "wav")
    sink.write(_tone(3000))
    sink.close()
    assert struct.unpack("<I", seekable.getvalue()[40:44])[0] == 6000  # patched when it can seek
    raw = _Pipe()
    sink = StreamSink(raw, SR, "pcm")
    sink.write(_tone(3000))
    assert bytes(raw.data) == to_int16(_tone(3000)).tobytes()
    with pytest.raises(AudioOutputError, match="cannot be streamed"):
        StreamSink(_Pipe(), SR, "flac")


def test_resolve_format():
    assert resolve_format("a.flac", None, False) == "flac"
    assert resolve_format("-", None, False) == "wav"
    assert resolve_format("-", None, True) == "pcm"
    assert resolve_format("a.bin", "flac", False) == "flac"
    assert resolve_format("a.FLAC", "flac", False) == "flac"
    with pytest.raises(AudioOutputError, match="--format flac does not match the file name 'a.wav'"):
        resolve_format("a.wav", "flac", False)  # FLAC bytes in a .wav file
    with pytest.raises(AudioOutputError, match="unknown audio format"):
        resolve_format("a.wav", "aac", False)
    with pytest.raises(AudioOutputError, match="cannot tell the audio format"):
        resolve_format("a.xyz", None, False)


# --- playback -------------------------------------------------------------------------------------


def test_player_plays_everything_in_order_with_prebuffer():
    written: list[np.ndarray] = []

    class Dev(FakeDevice):
        def write(self, pcm):
            super().write(pcm)
            written.append(pcm.copy())

    player = Player(SR, factory=Dev, prebuffer_s=0.1, block_s=0.02)
    audio = _tone(SR)
    for i in range(0, SR, 1000):
        player.feed(audio[i:i + 1000])
    player.finish()
    np.testing.assert_array_equal(np.concatenate(written), audio)
    assert written[0].size == int(0.02 * SR)


def test_player_waits_for_the_jitter_buffer_then_counts_underruns():
    dev_holder: list[FakeDevice] = []

    def factory(sr):
        dev_holder.append(FakeDevice(sr))
        return dev_holder[0]

    player = Player(SR, factory=factory, prebuffer_s=0.2, block_s=0.05)
    player.feed(_tone(int(0.1 * SR)))  # less than the prebuffer: nothing plays yet
    time.sleep(0.05)
    assert dev_holder[0].writes == []
    player.feed(_tone(int(0.15 * SR)))
    deadline = time.monotonic() + 2
    while sum(n for _, n in dev_holder[0].writes) < int(0.25 * SR) and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(0.05)  # the buffer is dry now and the stream not ended: an underrun
    player.feed(_tone(int(0.3 * SR)))
    player.finish()
    assert sum(n for _, n in dev_holder[0].writes) == int(0.55 * SR)
    assert player.underruns == 1 and dev_holder[0].closed


def test_player_reports_device_failure():
    class Broken(FakeDevice):
        def write(self, pcm):
            raise OSError("device unplugged")

    player = Player(SR, factory=Broken, prebuffer_s=0.01)
    player.feed(_tone(2000))
    with pytest.raises(Exception, match="device unplugged"):
        player.finish()


# --- sentence streaming -------------------------------------------------------------------------


def test_speak_streams_segments_in_order_and_prefetches():
    engine = FakeEngine(delay_s=0.001)
    template = RequestTemplate(voice="alice", seed=3)
    requests = [template.request(t) for t in ("First sentence here.", "Second one.", "Third and last one.")]
    got: list[int] = []
    submitted_when: list[int] = []

    def on_audio(pcm):
        got.append(pcm.size)
        submitted_when.append(len(engine.submitted))

    stats = speak(engine, requests, on_audio, SR)
    assert [r.text for r in engine.submitted] == [r.text for r in requests]
    assert all(r.voice == "alice" and r.seed == 3 for r in engine.submitted)
    assert stats.segments == 3 and stats.samples == sum(got) and stats.ttfa_s is not None
    # the 2nd sentence is submitted when the 1st delivers its first chunk, not after it ends
    assert submitted_when[0] == 2


def test_speak_names_the_failing_sentence_and_cancels_the_rest():
    engine = FakeEngine()
    requests = [RequestTemplate().request(t) for t in ("Fine sentence.", "fail-stream sentence.", "After.")]
    with pytest.raises(SpeechFailed, match=r"sentence 2 of 3: codec exploded"):
        speak(engine, requests, lambda pcm: None, SR)
    assert engine.streams[-1].cancelled
    with pytest.raises(SpeechFailed, match="sentence 2 of 2: this text asked to be refused"):
        speak(engine, [RequestTemplate().request(t) for t in ("ok ok ok.", "fail-input")], lambda p: None, SR)


def test_speak_stops_on_request():
    stop = threading.Event()
    engine = FakeEngine()

    def on_audio(pcm):
        stop.set()

    with pytest.raises(Stopped):
        speak(engine, [RequestTemplate().request("a long sentence " * 5)], on_audio, SR, stop=stop)
    assert engine.streams[0].cancelled


def test_manifest_json_roundtrip(tmp_path):
    from voxcli.batch import read_manifest

    m = tmp_path / "manifest.jsonl"
    m.write_text(json.dumps({"id": "a", "status": "ok"}) + "\n" + '{"id": "b", "sta')  # torn last line
    assert list(read_manifest(m)) == ["a"]


@pytest.mark.parametrize("model", ["demo", "demo-dia"])
def test_demo_note_said_once_and_never_under_quiet(model, capsys, monkeypatch):
    """say, batch and serve share announce_demo: every demo alias gets the note, --quiet silences it,
    and the loader's own warning is marked as said either way."""
    import voxcli.models as models

    from voxcli.console import DEMO_NOTE, announce_demo

    monkeypatch.setattr(models, "_demo_warned", set())
    announce_demo(model, quiet=True)
    assert capsys.readouterr().err == "" and model in models._demo_warned
    models._demo_warned.clear()
    announce_demo(model, quiet=False)
    assert DEMO_NOTE in capsys.readouterr().err and model in models._demo_warned
    announce_demo("Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice", quiet=False)
    announce_demo(None, quiet=False)
    assert capsys.readouterr().err == ""
