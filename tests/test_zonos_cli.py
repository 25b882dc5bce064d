"""`vox` with Zonos: the offline demo-zonos (built on first use), say with a saved voice and conditioning
options, voices (its options and voices listed), models, the OpenAI voice names `vox serve` maps, and
one-sentence errors before synthesis."""

from __future__ import annotations

import pytest
import soundfile as sf
from typer.testing import CliRunner

from voxcli import cli

FAST = ["-m", "demo-zonos", "--greedy", "--max-frames", "20", "--quiet"]


@pytest.fixture
def vox(tmp_path_factory, monkeypatch):
    cache = tmp_path_factory.getbasetemp() / "zonos_cli_cache"
    monkeypatch.setenv("VOX_CACHE", str(cache))
    monkeypatch.setattr(cli.console, "STATE", cli.console._State())

    def run(*args: str):
        return CliRunner().invoke(cli.app, list(args))

    return run


def test_say_demo_with_voice_writes_44khz_wav(vox, tmp_path):
    out = tmp_path / "z.wav"
    r = vox("say", *FAST, "Hello there.", "--voice", "aurora", "-o", str(out))
    assert r.exit_code == 0, r.output
    info = sf.info(str(out))
    assert info.samplerate == 44100 and 0 < info.frames <= 20 * 512 and info.frames % 512 == 0


def test_say_demo_with_ref_audio_clones_and_bad_clips_are_one_sentence(vox, tmp_path):
    import numpy as np

    t = np.arange(24000) / 24000
    sf.write(str(tmp_path / "clip.wav"), (0.3 * np.sin(2 * np.pi * 180 * t)).astype(np.float32), 24000)
    out = tmp_path / "c.wav"
    r = vox("say", *FAST, "Hello there.", "--ref-audio", str(tmp_path / "clip.wav"), "-o", str(out))
    assert r.exit_code == 0, r.output
    assert sf.info(str(out)).samplerate == 44100 and sf.info(str(out)).frames > 0
    sf.write(str(tmp_path / "short.wav"), np.zeros(2400, dtype=np.float32), 24000)
    r = vox("say", *FAST, "Hi.", "--ref-audio", str(tmp_path / "short.wav"), "-o", str(tmp_path / "s.wav"))
    assert r.exit_code != 0 and "give at least 0.5 s" in r.output
    (tmp_path / "junk.wav").write_bytes(b"not audio")
    r = vox("say", *FAST, "Hi.", "--ref-audio", str(tmp_path / "junk.wav"), "-o", str(tmp_path / "j.wav"))
    assert r.exit_code != 0 and "cannot read reference audio" in r.output


def test_voices_lists_options_and_saved_voices(vox):
    r = vox("voices", "-m", "demo-zonos")
    assert r.exit_code == 0, r.output
    for word in ("aurora", "basalt", "pitch_std", "speaking_rate", "emotion_happiness", "44100 Hz"):
        assert word in r.output, word
    r = vox("models")
    assert r.exit_code == 0 and "Zyphra/Zonos-v0.1-transformer" in r.output and "demo-zonos" in r.output


def test_openai_voice_names_map_to_saved_voices_or_the_default():
    from voxcli.server.voices import default_table, map_voice

    table = default_table(("aurora", "basalt"))
    assert map_voice("alloy", table, ("aurora", "basalt")) == "aurora"
    assert map_voice("onyx", table, ("aurora", "basalt")) == "basalt"
    # the released checkpoint has no saved voices: every OpenAI name is the learned default speaker
    assert map_voice("alloy", default_table(()), ()) is None


def test_bad_option_is_one_sentence_before_synthesis(vox, tmp_path):
    r = vox("say", *FAST, "Hello.", "--cfg-scale", "1", "-o", str(tmp_path / "x.wav"))
    assert r.exit_code != 0 and "cfg_scale must not be 1" in r.output
