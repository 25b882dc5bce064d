"""`vox` with the ESPnet SpeechLM family: the offline demo-speechlm (built on first use), say with
--cfg-scale and --show-text (the text phase detokenized on stderr), batch, models and voices listings,
one-sentence errors before any synthesis."""

from __future__ import annotations

import json

import pytest
import soundfile as sf
from typer.testing import CliRunner

from voxcli import cli

FAST = ["-m", "demo-speechlm", "--greedy", "--max-frames", "20"]


@pytest.fixture
def vox(tmp_path_factory, monkeypatch):
    cache = tmp_path_factory.getbasetemp() / "speechlm_cli_cache"
    monkeypatch.setenv("VOX_CACHE", str(cache))
    monkeypatch.setattr(cli.console, "STATE", cli.console._State())

    def run(*args: str):
        return CliRunner().invoke(cli.app, list(args))

    return run


def test_say_shows_the_text_phase_and_writes_16k_wav(vox, tmp_path):
    out = tmp_path / "s.wav"
    r = vox("say", *FAST, "w1 w2 w3. w4 w5!", "--cfg-scale", "3", "--show-text", "-o", str(out))
    assert r.exit_code == 0, r.output
    info = sf.info(str(out))
    assert info.samplerate == 16000 and info.frames == 20 * 320  # one request for the whole text
    shown = [line for line in r.output.splitlines() if line.startswith("vox: text: ")]
    assert len(shown) == 1 and len(shown[0]) > len("vox: text: ")


def test_show_text_on_a_model_without_a_text_phase_is_one_sentence(vox, tmp_path):
    r = vox("say", "-m", "demo-dia", "--greedy", "--max-frames", "20", "[S1] Hi.", "--show-text",
            "-o", str(tmp_path / "x.wav"))
    assert r.exit_code != 0 and "--show-text" in r.output and "writes no text phase" in r.output
    assert not (tmp_path / "x.wav").exists()


def test_bad_cfg_scale_is_one_sentence_before_synthesis(vox, tmp_path):
    r = vox("say", *FAST, "w1", "--cfg-scale", "0.5", "-o", str(tmp_path / "x.wav"))
    assert r.exit_code != 0 and "cfg_scale must be a number >= 1" in r.output
    assert not (tmp_path / "x.wav").exists()


def test_batch_and_listings(vox, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "a", "text": "w1 w2", "cfg_scale": 1}) + "\n"
                   + json.dumps({"id": "b", "text": "w3", "cfg_scale": 3}) + "\n")
    r = vox("batch", *FAST, "--quiet", str(src), "-o", str(tmp_path / "out"))
    assert r.exit_code == 0, r.output
    assert all(sf.info(str(tmp_path / "out" / f"{k}.wav")).frames == 20 * 320 for k in "ab")
    models = vox("models")
    assert models.exit_code == 0, models.output
    assert "demo-speechlm" in models.output and "espnet/bagpiper-tts-sft" in models.output
    voices = vox("voices", "-m", "demo-speechlm")
    assert voices.exit_code == 0, voices.output


def test_batch_show_text_writes_sidecar_and_manifest_field(vox, tmp_path):
    """--show-text in a batch: each item's text phase in <id>.txt and the record's model_text, the same
    text `vox say --show-text` prints for the same greedy request; a rerun without the text redoes it."""
    said = vox("say", *FAST, "w1 w2 w3", "--cfg-scale", "3", "--show-text", "-o", str(tmp_path / "s.wav"))
    assert said.exit_code == 0, said.output
    spoken = [line[len("vox: text: "):] for line in said.output.splitlines()
              if line.startswith("vox: text: ")]
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "a", "text": "w1 w2 w3", "cfg_scale": 3}) + "\n"
                   + json.dumps({"id": "b", "text": "w4", "cfg_scale": 1}) + "\n")
    out = tmp_path / "out"
    first = vox("batch", *FAST, "--quiet", str(src), "-o", str(out))  # no text asked for
    assert first.exit_code == 0, first.output
    assert not (out / "a.txt").exists()
    r = vox("batch", *FAST, "--quiet", "--show-text", str(src), "-o", str(out))
    assert r.exit_code == 0, r.output
    records = {json.loads(line)["id"]: json.loads(line) for line in (out / "manifest.jsonl").open()}
    assert spoken and records["a"]["model_text"] == spoken  # redone: the first run kept no text
    assert (out / "a.txt").read_text(encoding="utf-8") == "".join(t + "\n" for t in spoken)
    b_text = "".join(t + "\n" for t in records["b"]["model_text"])
    assert (out / "b.txt").read_text(encoding="utf-8") == b_text
    again = vox("batch", *FAST, "--show-text", str(src), "-o", str(out))  # nothing left to do
    assert again.exit_code == 0 and "0 written, 0 failed, 2 already done" in again.output


def test_batch_show_text_on_a_model_without_a_text_phase_is_one_sentence(vox, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("[S1] Hi.\n")
    r = vox("batch", "-m", "demo-dia", "--greedy", "--max-frames", "20", "--show-text", str(src),
            "-o", str(tmp_path / "out"))
    assert r.exit_code != 0 and "--show-text: model demo-dia writes no text phase" in r.output
