"""`vox transcribe` with the offline demo-speechlm (it hears through X-Codec's encoder): text on stdout,
`--json` objects with text and token ids, `-o FILE.jsonl` resumable, bad clips refused before the model
loads, a model that cannot hear says so in one sentence."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
from typer.testing import CliRunner

from voxcli import cli

FAST = ["-m", "demo-speechlm", "--greedy", "--quiet"]


@pytest.fixture
def vox(tmp_path_factory, monkeypatch):
    cache = tmp_path_factory.getbasetemp() / "speechlm_cli_cache"
    monkeypatch.setenv("VOX_CACHE", str(cache))
    monkeypatch.setattr(cli.console, "STATE", cli.console._State())

    def run(*args: str):
        return CliRunner().invoke(cli.app, list(args))

    return run


def _clip(path, seconds: float, rate: int, seed: int):
    t = np.arange(int(seconds * rate)) / rate
    g = np.random.default_rng(seed)
    sf.write(str(path), (0.3 * np.sin(2 * np.pi * 250 * t) + 0.05 * g.standard_normal(t.size)), rate)
    return str(path)


def test_json_lines_resume_and_stdout(vox, tmp_path):
    a = _clip(tmp_path / "a.wav", 1.2, 16000, 4)
    b = _clip(tmp_path / "b.flac", 0.8, 22050, 5)
    out = tmp_path / "t.jsonl"
    r = vox("transcribe", *FAST, a, b, "--json", "-o", str(out))
    assert r.exit_code == 0, r.output
    shown = [json.loads(line) for line in r.stdout.splitlines()]
    assert [s["clip"] for s in shown] == [a, b]
    assert all(s["text"] and s["token_ids"] for s in shown)
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(x["clip"], x["status"]) for x in recs] == [(a, "ok"), (b, "ok")]
    # resumable: nothing is run again (the model never loads), the same text is shown
    again = vox("transcribe", "-m", "no-such-model", a, b, "--json", "-o", str(out))
    assert again.exit_code == 0, again.output
    assert [json.loads(line) for line in again.stdout.splitlines()] == shown
    assert len(out.read_text().splitlines()) == 2
    plain = vox("transcribe", *FAST, a)
    assert plain.exit_code == 0 and plain.stdout.strip() == shown[0]["text"]


def test_bad_clips_are_refused_before_the_model_loads(vox, tmp_path):
    (tmp_path / "not.wav").write_text("hello")
    sf.write(str(tmp_path / "empty.wav"), np.zeros(0), 16000)
    for clip, msg in (
        (tmp_path / "missing.wav", "does not exist"),
        (tmp_path / "not.wav", "cannot read clip"),
        (tmp_path / "empty.wav", "is empty"),
    ):
        r = vox("transcribe", "-m", "no-such-model", str(clip))
        assert r.exit_code == 2 and msg in r.output, r.output


def test_a_model_that_cannot_hear_says_so(vox, tmp_path):
    a = _clip(tmp_path / "a.wav", 0.5, 16000, 1)
    r = vox("transcribe", "-m", "demo-dia", "--quiet", a)
    assert r.exit_code == 2 and "cannot hear" in r.output, r.output


def test_reply_answers_in_text_then_speech(vox, tmp_path):
    a = _clip(tmp_path / "q.wav", 1.2, 16000, 4)
    out = tmp_path / "reply.wav"
    r = vox("reply", "-m", "demo-speechlm", "--greedy", "--max-frames", "12", a, "-o", str(out))
    assert r.exit_code == 0, r.output
    info = sf.info(str(out))
    assert info.samplerate == 16000 and info.frames == 12 * 320
    text = vox("transcribe", *FAST, a)
    assert text.exit_code == 0 and text.stdout.strip() in r.stderr  # the same text first, on stderr
