"""The real `vox` CLI (Typer's runner) over a fake engine: outputs, playback, errors as sentences, and
batch resume/interrupt mechanics, fast and independent of any model."""

from __future__ import annotations

import functools
import io
import json
import os
import struct

import pytest
import soundfile as sf
from support.cli_fakes import SPEC, SR, FakeDevice, FakeEngine
from typer.testing import CliRunner
from voxcli.models.base import check_voice_and_language

from voxcli import cli, playback
from voxcli.session import Session, default_engine_factory


@pytest.fixture
def fake(monkeypatch):
    engine = FakeEngine()
    check = functools.partial(check_voice_and_language, SPEC)  # a model's neutral ModelProgram.check
    monkeypatch.setattr("voxcli.session.engine_factory", lambda cfg: Session(engine, SPEC, cfg.model, check))
    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    return engine


def vox(*args: str, input: str | None = None, env: dict | None = None):
    return CliRunner().invoke(cli.app, list(args), input=input, env=env)


def _one_error_line(result, code: int, *needles: str) -> None:
    assert result.exit_code == code, (result.exit_code, result.output)
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("vox: "), result.stderr
    assert "Traceback" not in result.output
    for n in needles:
        assert n in lines[0], lines[0]


def test_say_stdin_to_stdout_wav(fake):
    r = vox("say", "-", "-o", "-", input="Hello. How are you?")
    assert r.exit_code == 0, r.output
    data, sr = sf.read(io.BytesIO(r.stdout_bytes), dtype="float32")
    assert sr == SR and len(data) > 0
    assert "TTFA" in r.stderr and "RTF" in r.stderr  # timing on stderr, never in the audio stream


def test_say_raw_is_two_bytes_per_sample(fake):
    r = vox("say", "Some words to say here.", "--raw", "-o", "-", "--quiet")
    assert r.exit_code == 0, r.output
    samples = sum(max(2, len("Some words to say here.") // 10) * (SR // 10) for _ in range(1))
    assert len(r.stdout_bytes) == 2 * samples and r.stderr == ""


def test_say_flac_file_and_request_fields(fake, tmp_path):
    out = tmp_path / "x.flac"
    r = vox("say", "Hi there, Bob.", "-o", str(out), "-v", "bob", "--lang", "English", "--seed", "7",
            "--greedy", "--top-k", "5")
    assert r.exit_code == 0, r.output
    assert sf.info(str(out)).format == "FLAC" and not (tmp_path / "x.flac.part").exists()
    req = fake.submitted[0]
    assert (req.voice, req.language, req.seed, req.sampling.greedy, req.sampling.top_k) == \
        ("bob", "English", 7, True, 5)
    assert fake.closed


def test_say_long_text_is_split_into_ordered_requests(fake, tmp_path):
    text = " ".join(f"This is sentence number {i} of the story." for i in range(6))
    r = vox("say", text, "-o", str(tmp_path / "long.wav"))
    assert r.exit_code == 0, r.output
    expected = [f"This is sentence number {i} of the story." for i in range(6)]
    assert [q.text for q in fake.submitted] == expected
    assert "in 6 sentences" in r.stderr


def test_say_play_starts_before_generation_ends(fake, monkeypatch):
    FakeDevice.instances.clear()
    monkeypatch.setattr(playback, "default_device_factory", FakeDevice)
    fake.delay_s = 0.02
    r = vox("say", "A sentence long enough for several chunks of audio to stream.", "--play")
    assert r.exit_code == 0, r.output
    dev = FakeDevice.instances[0]
    chunks_total = max(2, len("A sentence long enough for several chunks of audio to stream.") // 10)
    assert dev.started and dev.closed and sum(n for _, n in dev.writes) == chunks_total * SR // 10
    # the first write reached the device before the engine produced its last chunk
    last_chunk_time = fake.streams[0].last_time
    assert dev.writes[0][0] < last_chunk_time


def test_play_without_portaudio_is_a_sentence(fake, monkeypatch):
    def no_portaudio(sr):
        raise playback.PlaybackError("cannot play audio: the PortAudio library is not installed; write a "
                                     "file with -o instead.")
    monkeypatch.setattr(playback, "default_device_factory", no_portaudio)
    _one_error_line(vox("say", "hi", "--play"), 1, "PortAudio", "-o")


def test_real_sounddevice_factory_message(monkeypatch):
    """On this machine PortAudio is absent (or no device exists): the real factory says so."""
    try:
        import sounddevice as sd
        sd.query_devices(kind="output")
        pytest.skip("an audio output device exists here")
    except (OSError, ImportError):
        pass
    except Exception:  # noqa: BLE001 - PortAudio present, no device: also a PlaybackError below
        pass
    with pytest.raises(playback.PlaybackError, match="cannot play audio"):
        playback.sounddevice_factory(SR)


# exit codes: 2 for what the command as typed gets wrong, 1 for a failure while running (test_exit_codes.py)
@pytest.mark.parametrize("args,code,needles", [
    (["say", "hi", "-m", "no/such-model"], 1, ["no/such-model", "vox models pull"]),
    (["say", "hi", "-m", "./missing-dir"], 2, ["./missing-dir", "vox models"]),
    (["say", "hi", "-v", "zed", "-o", "x.wav"], 2, ["no voice 'zed'", "alice, bob"]),
    (["say", "hi", "--lang", "klingon", "-o", "x.wav"], 2, ["language 'klingon'", "english"]),
    (["say", "-", "-o", "x.wav"], 2, ["empty"]),
    (["say", "hi", "-o", "x.aac"], 2, ["format"]),
    (["say", "hi", "--set", "bogus=1", "-o", "x.wav"], 2, ["unknown setting 'bogus'"]),
    (["say", "hi", "--policy", "fastest", "-o", "x.wav"], 2, ["policy must be one of"]),
    (["say", "hi", "--temperature", "0", "-o", "x.wav"], 2, ["--temperature"]),
    (["say", "fail-input", "-o", "x.wav"], 2, ["asked to be refused"]),
    (["say", "-f", "nope.txt", "-o", "x.wav"], 2, ["nope.txt", "does not exist"]),
    (["say", "hi", "-f", "nope.txt", "-o", "x.wav"], 2, ["not both"]),
    (["batch", "nope.txt", "-o", "out"], 2, ["nope.txt", "does not exist"]),
    (["say", "hi", "--ref-audio", "nope.wav", "-o", "x.wav"], 2, ["--ref-audio nope.wav does not exist"]),
    (["batch", "-", "-o", "out", "-c", "0"], 2, ["--concurrency"]),
])
def test_errors_are_one_sentence(fake, tmp_path, monkeypatch, args, code, needles):
    monkeypatch.chdir(tmp_path)
    if args[2:4] == ["-m", "no/such-model"] or args[2:4] == ["-m", "./missing-dir"]:
        monkeypatch.setattr("voxcli.session.engine_factory", default_engine_factory)
    _one_error_line(vox(*args, input=""), code, *needles)
    assert not list(tmp_path.glob("*.part"))


def test_unwritable_output_is_a_sentence(fake, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    # caught before any model load now (exit 2, a usage mistake), naming -o and the blocking file
    _one_error_line(vox("say", "hi", "-o", str(blocker / "x.wav")), 2, "-o", f"{blocker} is not a directory")
    _one_error_line(vox("say", "hi", "-o", str(tmp_path)), 2, "-o", "is a directory")
    _one_error_line(vox("batch", "-", "-o", str(blocker / "out"), input="hi\n"), 2, str(blocker))


def test_debug_shows_the_traceback(fake):
    r = vox("--debug", "say", "fail-input", "-o", "-")
    assert r.exit_code == 1 and r.exception is not None  # re-raised for the traceback


def test_internal_errors_are_one_line_too(fake, monkeypatch):
    def broken(cfg):
        raise ZeroDivisionError("boom")
    monkeypatch.setattr("voxcli.session.engine_factory", broken)
    _one_error_line(vox("say", "hi", "-o", "-"), 1, "internal error", "ZeroDivisionError", "--debug")


def test_stdout_terminal_refused(fake, monkeypatch):
    monkeypatch.setattr("voxcli.cli_speech.isatty", lambda s: True)
    _one_error_line(vox("say", "hi", "-o", "-"), 2, "terminal")


# --- batch ---------------------------------------------------------------------------------------


def _lines(n: int) -> list[str]:
    return [f"Line number {i} is spoken here." for i in range(n)]


def test_batch_mixed_input_fails_only_bad_items(fake, tmp_path):
    lines = _lines(6)
    lines[2] = ""
    lines[3] = '{"id": "v", "text": "Hello there.", "voice": "zed"}'
    lines[4] = "fail-stream here, a line that breaks in the middle."
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    r = vox("batch", str(src), "-o", str(out), "--quiet")
    assert r.exit_code == 1  # some items failed: the exit code says so, the rest are written
    recs = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert [x["id"] for x in recs] == ["0001", "0002", "0003", "v", "0005", "0006"]
    errors = {x["id"]: x["error"] for x in recs if x["status"] == "error"}
    assert set(errors) == {"0003", "v", "0005"}
    assert "empty" in errors["0003"] and "no voice 'zed'" in errors["v"]
    assert "codec exploded" in errors["0005"]
    assert sorted(p.name for p in out.glob("*.wav")) == ["0001.wav", "0002.wav", "0006.wav"]
    assert not list(out.glob("*.part"))
    ok = next(x for x in recs if x["id"] == "0001")
    assert ok["duration_s"] > 0 and ok["ttfa_s"] is not None and ok["wall_s"] > 0 and ok["file"] == "0001.wav"


def test_batch_interrupt_then_resume(fake, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("\n".join(_lines(12)) + "\n")
    out = tmp_path / "out"
    r = vox("batch", str(src), "-o", str(out), "-c", "3", "--quiet", env={"VOX_TEST_INTERRUPT_AFTER": "5"})
    assert r.exit_code == 130 and "Run the same command again" in r.stderr
    first = {p.name: p.stat().st_mtime_ns for p in out.glob("*.wav")}
    assert 5 <= len(first) < 12 and not list(out.glob("*.part"))
    n_submitted = len(fake.submitted)
    r = vox("batch", str(src), "-o", str(out), "-c", "3", "--quiet")
    assert r.exit_code == 0, r.output
    assert len(list(out.glob("*.wav"))) == 12
    assert all((out / name).stat().st_mtime_ns == t for name, t in first.items())  # not regenerated
    assert len(fake.submitted) - n_submitted == 12 - len(first)
    recs = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert len(recs) == 12 and all(x["status"] == "ok" for x in recs)


def test_batch_resume_retries_failed_and_redoes_changed(fake, tmp_path):
    src = tmp_path / "in.tsv"
    src.write_text("a\tHello there friend.\nb\tfail-input please\n")
    out = tmp_path / "out"
    assert vox("batch", str(src), "-o", str(out), "-q").exit_code == 1
    src.write_text("a\tHello there friend.\nb\tNow it is fine.\n")
    before = len(fake.submitted)
    assert vox("batch", str(src), "-o", str(out), "-q").exit_code == 0
    assert [q.text for q in fake.submitted[before:]] == ["Now it is fine."]  # a skipped, b retried
    src.write_text("a\tHello there, changed.\nb\tNow it is fine.\n")
    before = len(fake.submitted)
    assert vox("batch", str(src), "-o", str(out), "-q").exit_code == 0
    assert [q.text for q in fake.submitted[before:]] == ["Hello there, changed."]


def test_quiet_batch_with_failures_says_what_failed_but_not_the_timing(fake, tmp_path):
    src = tmp_path / "in.tsv"
    src.write_text("a\tHello there friend.\nb\tfail-input please\n")
    r = vox("batch", str(src), "-o", str(tmp_path / "out"), "-q")
    assert r.exit_code == 1 and "1 written, 1 failed, 0 already done" in r.stderr, r.stderr
    assert "failed b" in r.stderr and " s audio in " not in r.stderr and "RTF" not in r.stderr
    r = vox("batch", str(src), "-o", str(tmp_path / "out2"))
    assert " s audio in " in r.stderr  # without -q the timing is there


def test_batch_stale_part_files_are_removed(fake, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "0001.wav.part").write_bytes(b"RIFF half")
    r = vox("batch", "-", "-o", str(out), "-q", input="Just one line here.\n")
    assert r.exit_code == 0 and (out / "0001.wav").exists() and not (out / "0001.wav.part").exists()


def test_wav_header_constant():
    from voxcli.audio import wav_header

    h = wav_header(SR, 100)
    assert h[:4] == b"RIFF" and struct.unpack("<I", h[4:8])[0] == 136 and len(h) == 44


def test_help_has_examples():
    for cmd in ("say", "batch", "voices", "models"):
        r = vox(cmd, "--help")
        assert r.exit_code == 0 and "Example" in r.output, cmd
    assert os.environ.get("VOX_TEST_INTERRUPT_AFTER") is None


# --- models ---------------------------------------------------------------------------------------


@pytest.fixture
def hf_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache, offline, with one model 'downloaded' into it on request."""
    import huggingface_hub.constants as hfc

    cache = tmp_path / "hf"
    cache.mkdir()
    monkeypatch.setattr(hfc, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hfc, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("VOX_CACHE", str(tmp_path / "vox"))

    def add(repo_id: str) -> None:
        repo = cache / f"models--{repo_id.replace('/', '--')}"
        snap = repo / "snapshots" / ("a" * 40)
        snap.mkdir(parents=True)
        (snap / "config.json").write_text('{"model_type": "qwen3_tts"}')
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text("a" * 40)
    return add


def test_models_lists_known_and_cached(hf_cache):
    hf_cache("Qwen/Qwen3-TTS-12Hz-0.6B-Base")
    r = vox("models")
    assert r.exit_code == 0, r.output
    rows = {line.split()[0]: line.split()[1] for line in r.stdout.splitlines()[1:] if line.strip()
            and not line.startswith((" ", "─"))}  # a row's first line; not the rule under the header
    assert rows["Qwen/Qwen3-TTS-12Hz-0.6B-Base"] == "yes"
    assert rows["Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"] == "no" and rows["demo"] == "no"


def test_default_model_not_cached_says_how_to_get_it(hf_cache, monkeypatch):
    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    _one_error_line(vox("say", "hi", "-o", "-"), 1, "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice",
                    "not in the local Hugging Face cache", "vox models pull", "-m demo")
    _one_error_line(vox("voices"), 1, "vox models pull")


def test_models_pull_offline_and_bad_ids(hf_cache):
    _one_error_line(vox("models", "pull", "Qwen/Qwen3-TTS-12Hz-1.7B-Base"), 1, "not reachable", "-m demo")
    _one_error_line(vox("models", "pull", "not-an-id"), 1, "not a Hugging Face model id")
    _one_error_line(vox("models", "pull", "demo"), 1, "built locally")


def test_auto_backend_is_the_cpu_here_and_the_timing_line_names_it(monkeypatch):
    import torch

    engine, seen = FakeEngine(), {}
    check = functools.partial(check_voice_and_language, SPEC)

    def factory(cfg):
        seen["cfg"] = cfg
        return Session(engine, SPEC, cfg.model, check, backend=f"{cfg.executor} executor on {cfg.device}")

    monkeypatch.setattr("voxcli.session.engine_factory", factory)
    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    r = vox("say", "Hello there.", "-o", "-")
    assert r.exit_code == 0, r.output
    assert (seen["cfg"].executor, seen["cfg"].device) == ("cpu", "cpu")
    assert "cpu executor on cpu" in r.stderr
    _one_error_line(vox("say", "--executor", "cuda", "Hello there.", "-o", "-"), 2, "executor=cuda",
                    "torch sees none")
