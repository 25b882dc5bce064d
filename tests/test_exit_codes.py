"""One rule for exit codes (issue 32; voxcli/console.py): 2 when the command as typed cannot work (a flag,
an argument, a model name, a voice or language, an output path, the input text, a request the model
refuses), 1 when it was fine but running it failed (a model not downloaded, a synthesis failure, an internal
error). Each case is one `vox: ` line on stderr, over the CLI with a fake engine (no model)."""

from __future__ import annotations

import functools

import pytest
from support.cli_fakes import SPEC, FakeEngine
from typer.testing import CliRunner
from voxcli.models.base import check_voice_and_language

from voxcli import cli
from voxcli.session import Session, default_engine_factory

USAGE = [
    ["say", "hi", "--seed", "-5", "-o", "x.wav"],
    ["say", "hi", "--seed", "many", "-o", "x.wav"],
    ["say", "hi", "--no-such-flag"],
    ["say", "hi", "--temperature", "0", "-o", "x.wav"],
    ["say", "hi", "--set", "bogus=1", "-o", "x.wav"],
    ["say", "hi", "--policy", "fastest", "-o", "x.wav"],
    ["say", "hi", "--dtype", "float8", "-o", "x.wav"],
    ["say", "hi", "-v", "zed", "-o", "x.wav"],
    ["say", "hi", "--lang", "klingon", "-o", "x.wav"],
    ["say", "fail-input", "-o", "x.wav"],
    ["say", "-", "-o", "x.wav"],
    ["say", "-f", "nope.txt", "-o", "x.wav"],
    ["say", "hi", "-o", "x.aac"],
    ["say", "hi", "--format", "flac", "-o", "x.wav"],
    ["say", "hi", "--format", "aiff", "-o", "x.wav"],
    ["say", "hi", "--raw", "-o", "x.wav"],
    ["say", "hi", "--raw", "--format", "flac", "-o", "-"],
    ["say", "hi", "--format", "flac", "-o", "-"],
    ["say", "hi", "-o", "no/such/folder/x.wav"],
    ["say", "hi", "--ref-audio", "nope.wav", "-o", "x.wav"],
    ["batch", "nope.txt", "-o", "out"],
    ["batch", "-", "-o", "out", "-c", "0"],
    ["batch", "-", "-o", "no/such/folder/out"],
    ["batch", "-", "-o", "out", "--replicas", "0"],
]
REAL_LOADER_USAGE = [  # the real model loader's name checks (no model is ever found or loaded)
    ["say", "hi", "-m", "./missing-dir", "-o", "x.wav"],
    ["say", "hi", "-m", "dmeo", "-o", "x.wav"],
    ["batch", "-", "-m", "demo-dai", "-o", "out"],
]
FAILURES = [
    ["say", "fail-stream and more words here", "-o", "x.wav"],
]


@pytest.fixture
def fake(monkeypatch, tmp_path):
    engine = FakeEngine()
    check = functools.partial(check_voice_and_language, SPEC)
    monkeypatch.setattr("voxcli.session.engine_factory", lambda cfg: Session(engine, SPEC, cfg.model, check))
    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VOX_CACHE", str(tmp_path / "cache"))
    return engine


def _exit(args: list[str], code: int) -> str:
    result = CliRunner().invoke(cli.app, args, input="hi\n" if args[0] == "batch" else "")  # say -: empty
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert result.exit_code == code, (args, result.exit_code, result.output)
    assert lines and lines[-1].startswith("vox: ") and "Traceback" not in result.output, result.output
    return lines[-1]


@pytest.mark.parametrize("args", USAGE, ids=" ".join)
def test_usage_mistakes_exit_2(fake, args):
    _exit(args, 2)
    assert not fake.submitted or args[1] == "fail-input"  # refused before any synthesis


@pytest.mark.parametrize("args", REAL_LOADER_USAGE, ids=" ".join)
def test_model_names_that_name_nothing_exit_2(fake, monkeypatch, args):
    monkeypatch.setattr("voxcli.session.engine_factory", default_engine_factory)
    _exit(args, 2)


@pytest.mark.parametrize("args", FAILURES, ids=" ".join)
def test_failures_while_running_exit_1(fake, args):
    _exit(args, 1)


def test_a_model_not_downloaded_exits_1(fake, monkeypatch, tmp_path):
    import huggingface_hub.constants as hfc

    monkeypatch.setattr(hfc, "HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setattr(hfc, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr("voxcli.session.engine_factory", default_engine_factory)
    line = _exit(["say", "hi", "-m", "Qwen/Qwen3-TTS-12Hz-1.7B-Base", "-o", "x.wav"], 1)
    assert "vox models pull" in line
