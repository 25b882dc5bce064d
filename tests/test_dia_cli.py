"""`vox` with Dia: the offline demo-dia (built on first use), say with --cfg-scale, batch with JSONL
cfg_scale, voices and models listings, one-sentence errors before any synthesis."""

from __future__ import annotations

import json

import pytest
import soundfile as sf
from typer.testing import CliRunner

from voxcli import cli
from voxcli.text import read_batch_inputs

FAST = ["-m", "demo-dia", "--greedy", "--max-frames", "20", "--quiet"]


@pytest.fixture
def vox(tmp_path_factory, monkeypatch):
    cache = tmp_path_factory.getbasetemp() / "dia_cli_cache"
    monkeypatch.setenv("VOX_CACHE", str(cache))
    monkeypatch.setattr(cli.console, "STATE", cli.console._State())

    def run(*args: str):
        return CliRunner().invoke(cli.app, list(args))

    return run


def test_say_demo_dia_writes_44k_wav_of_whole_dialogue(vox, tmp_path):
    out = tmp_path / "d.wav"
    r = vox("say", *FAST, "[S1] Hello there. [S2] Hi!", "--cfg-scale", "3", "-o", str(out))
    assert r.exit_code == 0, r.output
    info = sf.info(str(out))
    # one request for the whole dialogue (no sentence split): exactly --max-frames frames of 512 samples
    assert info.samplerate == 44100 and info.frames == 20 * 512


def test_bad_cfg_scale_is_one_sentence_before_synthesis(vox, tmp_path):
    r = vox("say", *FAST, "[S1] Hi.", "--cfg-scale", "0.5", "-o", str(tmp_path / "x.wav"))
    assert r.exit_code != 0 and "cfg_scale must be >= 1" in r.output
    assert not (tmp_path / "x.wav").exists()


def test_batch_jsonl_cfg_scale(vox, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(
        json.dumps({"id": "a", "text": "[S1] One. [S2] Two.", "cfg_scale": 1})
        + "\n"
        + json.dumps({"id": "b", "text": "[S1] Three.", "cfg_scale": 2.5})
        + "\n"
        + json.dumps({"id": "c", "text": "[S1] Bad.", "cfg_scale": "high"})
        + "\n"
    )
    items = read_batch_inputs([str(src)])
    assert [i.cfg_scale for i in items[:2]] == [1.0, 2.5] and "cfg_scale must be a number" in items[2].error
    assert items[0].fingerprint() != read_batch_inputs([str(src)])[1].fingerprint()
    r = vox("batch", *FAST, str(src), "-o", str(tmp_path / "out"))
    assert r.exit_code == 1, r.output  # item c fails alone
    assert sf.info(str(tmp_path / "out" / "a.wav")).frames == 20 * 512
    assert sf.info(str(tmp_path / "out" / "b.wav")).frames == 20 * 512


def test_voices_and_models_list_dia(vox):
    r = vox("voices", "-m", "demo-dia")
    assert r.exit_code == 0, r.output
    assert "44100 Hz" in r.output and "english" in r.output
    r = vox("models")
    assert r.exit_code == 0 and "nari-labs/Dia-1.6B-0626" in r.output and "demo-dia" in r.output


def test_voice_clone_through_the_dac_encoder(vox, tmp_path):
    import numpy as np

    clip = tmp_path / "me.wav"
    t = np.arange(int(0.2 * 44100)) / 44100
    sf.write(str(clip), (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32), 44100)
    out = tmp_path / "clone.wav"
    r = vox(
        "say",
        *FAST,
        "[S2] Nice to meet you.",
        "--ref-audio",
        str(clip),
        "--ref-text",
        "[S1] This is me.",
        "-o",
        str(out),
    )
    assert r.exit_code == 0, r.output
    assert sf.info(str(out)).frames == 20 * 512  # only the generated part, not the clip
    slow = tmp_path / "slow.wav"
    sf.write(str(slow), np.zeros(4000, np.float32), 16000)
    r = vox("say", *FAST, "[S1] Hi.", "--ref-audio", str(slow), "--ref-text", "[S1] x", "-o", str(out))
    assert r.exit_code == 0, r.output  # a 16 kHz clip is resampled to the DAC's 44.1 kHz (issue 32)
    r = vox("say", *FAST, "[S1] Hi.", "--ref-audio", str(clip), "-o", str(out))
    assert r.exit_code != 0 and "--ref-text" in r.output
