"""Higgs Audio on the real engine (cpu executor), our own tiny checkpoint: batching exactness, the CLI.

A greedy request alone vs the same request among 7 others (sampled and greedy, different texts and frame
counts, staggered arrivals) with a KV pool and a codec slot table small enough that pages and slots are
reused: the audio must agree to 1e-4."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
from support.alone_vs_among import alone_vs_among
from typer.testing import CliRunner
from voxcli.models.base import SamplingParams, SynthesisRequest

TARGET = SynthesisRequest(
    text="The target request says hello.", sampling=SamplingParams(greedy=True), max_frames=30
)


def _others() -> list[SynthesisRequest]:
    texts = [
        "One.",
        "Two, a longer line of text here.",
        "Three!",
        "Four is four.",
        "Five.",
        "Six six six.",
        "Seven, the last.",
    ]
    return [
        SynthesisRequest(
            text=t,
            seed=i,
            sampling=SamplingParams(greedy=i % 2 == 0, temperature=0.8, top_k=20),
            max_frames=6 + 5 * i,
        )
        for i, t in enumerate(texts)
    ]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    from voxcli.models.higgs_audio.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("higgs_engine") / "ckpt", output_std=0.1)


def test_alone_equals_among_seven_others(ckpt):
    r = alone_vs_among(ckpt, TARGET, _others(), roomy_pages=200, kv_pages=60, stagger=0.03, page_size=16,
                       first_chunk=15)  # a few requests' pages: reuse
    assert not r.failures, r.failures
    assert r.got.shape == r.alone.shape == (30 * 960,)
    assert float(np.std(r.alone)) > 0.01
    assert np.abs(r.got - r.alone).max() <= 1e-4
    assert r.kv_free == 60 and r.slots_free == 3
    assert [b for b in r.batches if r.target_id in b and len(b) > 1]  # it really shared decode steps


def _vox(*args):
    from voxcli.cli import app

    return CliRunner().invoke(app, list(args))


def test_cli_say_batch_voices_models_and_refusals(ckpt, tmp_path):
    out = tmp_path / "a.wav"
    r = _vox(
        "say", "-m", str(ckpt), "Hello there.", "-o", str(out), "--greedy", "--max-frames", "12", "--quiet"
    )
    assert r.exit_code == 0, r.output
    wav, sr = sf.read(out)
    assert sr == 24000 and wav.shape == (12 * 960,)
    lines = tmp_path / "lines.jsonl"
    lines.write_text(
        "\n".join(json.dumps({"id": f"u{i}", "text": t}) for i, t in enumerate(["One.", "Two!"]))
    )
    r = _vox(
        "batch", "-m", str(ckpt), str(lines), "-o", str(tmp_path / "out"), "--max-frames", "10", "--quiet"
    )
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in (tmp_path / "out").glob("*.wav")) == ["u0.wav", "u1.wav"]
    r = _vox("voices", "-m", str(ckpt))
    assert r.exit_code == 0 and "24000 Hz, 25 frames/s" in r.output
    r = _vox("models")
    assert (
        r.exit_code == 0
        and "demo-higgs" in r.output
        and "eustlb/higgs-audio-v2-generation-3B-base" in r.output
    )
    r = _vox("say", "-m", str(ckpt), "Hi.", "-o", str(tmp_path / "b.wav"), "--voice", "alice")
    assert r.exit_code != 0 and "no named voices" in r.output


def test_checkpoint_errors_name_key_and_path(ckpt, tmp_path):
    import shutil

    from voxcli.models.base import CheckpointError
    from voxcli.models.higgs_audio.program import HiggsProgram

    bad = tmp_path / "bad"
    shutil.copytree(ckpt, bad)
    d = json.loads((bad / "config.json").read_text())
    d["codebook_size"] = 1024
    (bad / "config.json").write_text(json.dumps(d))
    with pytest.raises(CheckpointError, match="codebook_size 1024 .* 1026"):
        HiggsProgram.load(str(bad))
    d["codebook_size"] = 1026
    d["num_hidden_layers"] = 3
    (bad / "config.json").write_text(json.dumps(d))
    with pytest.raises(CheckpointError, match=r"model\.layers\.2\.self_attn\.q_proj\.weight.* is missing"):
        HiggsProgram.load(str(bad))
    d["num_hidden_layers"] = 2
    d["audio_bos_token_id"] = 5
    (bad / "config.json").write_text(json.dumps(d))
    with pytest.raises(CheckpointError, match="<\\|audio_out_bos\\|>.*config.json says 5"):
        HiggsProgram.load(str(bad))


def test_vox_serve_streams_what_vox_say_writes(ckpt, tmp_path, monkeypatch):
    pytest.importorskip("fastapi", reason="the serve extra is not installed")
    httpx = pytest.importorskip("httpx", reason="httpx is not installed (the test extra)")
    import io

    from support.serve_util import running_server

    from voxcli import cli
    from voxcli.server.service import SpeechService
    from voxcli.session import EngineOptions, open_session

    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    out = tmp_path / "say.wav"
    text = "Serve this one."
    r = _vox("say", "-m", str(ckpt), "--greedy", "--max-frames", "20", "--quiet", text, "-o", str(out))
    assert r.exit_code == 0, r.output
    said, sr = sf.read(str(out), dtype="int16")
    session = open_session(EngineOptions(model=str(ckpt)))
    with running_server(SpeechService(session)) as url:
        body = {"model": str(ckpt), "input": text, "greedy": True, "max_frames": 20, "response_format": "wav"}
        resp = httpx.post(f"{url}/v1/audio/speech", json=body, timeout=120)
        assert resp.status_code == 200, resp.text
    served, served_sr = sf.read(io.BytesIO(resp.content), dtype="int16")
    assert served_sr == sr == 24000 and served.shape == said.shape == (20 * 960,)
    assert np.abs(served.astype(int) - said.astype(int)).max() <= 1
