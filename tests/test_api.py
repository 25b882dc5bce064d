"""The Python API (`voxcli.load` -> TTS): what it opens, the requests it takes and refuses, and how
it streams, batches and fails. Most run over the CLI tests' fake engine (sine chunks from a thread, no
model); one runs the offline demo model end to end (the README examples run it too)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf
from support.cli_fakes import SPEC, SR, FakeEngine
from voxcli.models.base import InputError, SamplingParams

import voxcli
from voxcli.engine.stream import RequestRejected
from voxcli.session import Session


@pytest.fixture
def fake(monkeypatch):
    """voxcli.load over a FakeEngine; the configs it was opened with are kept."""
    engine = FakeEngine()
    engine.configs = []

    def factory(config):
        engine.configs.append(config)
        return Session(engine, SPEC, config.model, check=_check)

    monkeypatch.setattr("voxcli.session.engine_factory", factory)
    return engine


def _check(request) -> None:
    if request.voice not in (None, *SPEC.voices):
        raise InputError(f"model fake has no voice {request.voice!r}")


def test_import_voxcli_is_light():
    code = "import sys, voxcli; print(sorted({'numpy', 'torch'} & set(sys.modules)), voxcli.__all__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("[]") and "'load'" in out and "'TTS'" in out


def test_load_takes_the_cli_flags_as_keywords(fake):
    with voxcli.load("demo", settings={"policy": "sync", "max_running": 4}, dtype="float32") as tts:
        assert tts.model == "demo" and tts.sample_rate == SR and tts.voices() == ["alice", "bob"]
    config = fake.configs[0]
    assert (config.policy, config.max_running, config.dtype, config.admission) == ("sync", 4, "float32",
                                                                                   "deadline")
    assert fake.closed  # leaving the with block stops the engine


def test_settings_no_engine_takes_fail_at_load(fake):
    from voxcli.config import ConfigError

    with pytest.raises(ConfigError, match="policy"):
        voxcli.load("demo", settings=["policy=sometimes"])
    assert not fake.configs  # refused before any engine opened


def test_say_returns_the_whole_utterance(fake, tmp_path):
    with voxcli.load("demo") as tts:
        audio = tts.say("Hello there. And a second sentence here.", voice="alice", seed=3)
    assert audio.samples.dtype == np.float32 and audio.sample_rate == SR and audio.samples.size > SR // 10
    assert audio.ttfa_s is not None and 0 <= audio.ttfa_s <= audio.wall_s
    assert [r.seed for r in fake.submitted] == [3, 3] and fake.submitted[0].voice == "alice"
    for name in ("hello.wav", "hello.flac", "hello.pcm"):
        audio.save(tmp_path / name)
    data, rate = sf.read(tmp_path / "hello.flac", dtype="float32")
    assert rate == SR and data.size == audio.samples.size
    assert (tmp_path / "hello.pcm").stat().st_size == 2 * audio.samples.size
    with pytest.raises(Exception, match="cannot tell the audio format"):
        audio.save(tmp_path / "hello.xyz")


def test_request_fields_are_checked_as_a_jsonl_line_is(fake):
    with voxcli.load("demo") as tts:
        cases = {"seed must be a whole number": {"seed": -1},
                 "seed must be a whole number ": {"seed": True},
                 "max_frames must be at least 1": {"max_frames": 0},
                 "top_p must be a finite number above 0 and at most 1": {"sampling": {"top_p": 2.0}},
                 "temperature must be a finite number above 0": {"sampling": SamplingParams(temperature=0.0)},
                 "unknown sampling field": {"sampling": {"heat": 1}},
                 "voice must be a string": {"voice": 3},
                 "cfg_scale must be a number": {"cfg_scale": "lots"},
                 "options must be an object": {"options": ["x"]},
                 "unknown request field\\(s\\) speed": {"speed": 2},
                 "ref_audio must be a file path or": {"ref_audio": 5},
                 "holds NaN": {"ref_audio": (np.array([0.0, np.nan]), 16000)},
                 "does not exist": {"ref_audio": "/no/such/clip.wav"}}
        for message, fields in cases.items():
            with pytest.raises(voxcli.RequestFieldError, match=message):
                tts.say("Hello.", **fields)
        with pytest.raises(voxcli.RequestFieldError, match="text is empty"):
            tts.say("   ")
        with pytest.raises(InputError, match="no voice 'carol'"):  # the model's own check, typed
            tts.say("Hello.", voice="carol")
    assert not fake.submitted  # every refusal came before synthesis
    assert issubclass(voxcli.RequestFieldError, ValueError) and issubclass(voxcli.RequestFieldError,
                                                                           voxcli.VoxError)


def test_engine_errors_arrive_typed_with_the_sentence_noted(fake):
    with voxcli.load("demo") as tts:
        with pytest.raises(InputError, match="asked to be refused") as refused:
            tts.say("One sentence first. Then fail-input here.")
        assert any("sentence 2 of 2" in note for note in refused.value.__notes__)
        with pytest.raises(RuntimeError, match="codec exploded"):
            tts.say("fail-stream now")


def test_stream_delivers_chunks_and_leaving_early_cancels(fake):
    with voxcli.load("demo") as tts:
        chunks = list(tts.stream("Twenty characters or more of text here."))
        assert len(chunks) >= 2 and all(c.dtype == np.float32 and c.size == SR // 10 for c in chunks)
        for _ in tts.stream("Another text that is long enough to have several chunks in it."):
            break
    assert fake.streams[-1].cancelled


def test_astream_does_not_block_the_event_loop(fake):
    async def main() -> tuple[int, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        task = asyncio.create_task(ticker())
        with voxcli.load("demo") as tts:
            got = [c async for c in tts.astream("Twenty characters or more of text here.")]
        task.cancel()
        return len(got), ticks

    n, ticks = asyncio.run(main())
    assert n >= 2 and ticks > 1


def test_batch_keeps_order_and_fails_only_the_bad_items(fake):
    with voxcli.load("demo") as tts:
        results = tts.batch(["First text here.", {"id": "b", "text": "Second one.", "voice": "bob"},
                             {"text": "Third.", "voice": "carol"}, {"voice": "alice"}, "fail-stream item"],
                            concurrency=3, seed=5)
        with pytest.raises(voxcli.RequestFieldError, match="concurrency must be at least 1"):
            tts.batch(["x"], concurrency=0)
    assert [type(r).__name__ for r in results] == ["Audio", "Audio", "InputError", "RequestFieldError",
                                                   "RuntimeError"]
    assert {r.voice for r in fake.submitted if r.text == "Second one."} == {"bob"}
    assert all(r.seed == 5 for r in fake.submitted)


def test_a_full_engine_is_a_typed_rejection(fake, monkeypatch):
    def full(request, continues=None):
        raise RequestRejected("the engine is full (queue 8 of 8); retry later")

    monkeypatch.setattr(fake, "submit", full)
    with voxcli.load("demo") as tts, pytest.raises(RequestRejected, match="engine is full"):
        tts.say("Hello.")


def test_the_demo_model_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setenv("VOX_CACHE", str(tmp_path / "cache"))
    with voxcli.load("demo") as tts:
        audio = tts.say("Hello there.", voice=tts.voices()[0], seed=1)
        again = tts.say("Hello there.", voice=tts.voices()[0], seed=1)
    assert audio.sample_rate == 24000 and audio.duration_s > 0
    np.testing.assert_array_equal(audio.samples, again.samples)  # a seed repeats
