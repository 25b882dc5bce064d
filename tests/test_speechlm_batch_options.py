"""`vox batch -m demo-speechlm` with a JSONL row asking for 10^12 segments among good rows: the row fails
alone with the schema's sentence naming options.max_segments, the others are written (before issue 34 the
engine thread planned 10^12 segments one by one and nothing was ever done); `vox voices` lists the
options from the family's schema."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from voxcli import cli


@pytest.fixture
def vox(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("VOX_CACHE", str(tmp_path_factory.getbasetemp() / "speechlm_batch_cache"))
    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    return lambda *args: CliRunner().invoke(cli.app, list(args))


def test_a_row_asking_for_a_trillion_segments_fails_alone(vox, tmp_path):
    src = tmp_path / "in.jsonl"
    lines = [{"id": "a", "text": "w1 w2"},
             {"id": "huge", "text": "w1 w2", "options": {"max_segments": 10 ** 12}},
             # sampled (no --greedy): a top-k far past the vocabulary keeps it all (it allocated k before)
             {"id": "b", "text": "w3 w4", "seed": 1, "options": {"max_segments": 2, "text_top_k": 10 ** 9}}]
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "out"
    r = vox("batch", "-m", "demo-speechlm", "--top-k", str(10 ** 9), "--max-frames", "8", str(src),
            "-o", str(out))
    assert r.exit_code == 1, r.output  # the one bad row
    assert "options.max_segments must be a whole number from 1 to 64" in r.output
    assert (out / "a.wav").exists() and (out / "b.wav").exists() and not (out / "huge.wav").exists()


def test_voices_lists_the_schema_options(vox):
    r = vox("voices", "-m", "demo-speechlm")
    assert r.exit_code == 0, r.output
    for name in ("max_segments: a whole number from 1 to 64", "text_temperature", "text_top_k"):
        assert name in r.output
