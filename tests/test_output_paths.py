"""Output paths are checked before any model loads (issue 32, items 4, 5, 10): a missing folder is refused
(a typo is never created silently) unless --mkdir; a folder that cannot be written is named with the
system's reason; headerless --raw PCM is never written under a .wav name. The engine factory here fails
the test if it is ever reached: every refusal comes first."""

from __future__ import annotations

import errno
import tempfile

import pytest
from typer.testing import CliRunner

from voxcli import cli


@pytest.fixture
def no_model(monkeypatch):
    """The list of model loads reached (each refused at once): a check that comes first leaves it empty."""
    loads: list[str] = []

    def load(cfg):
        loads.append(cfg.model)
        raise RuntimeError("the model load was reached")
    monkeypatch.setattr("voxcli.session.engine_factory", load)
    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    return loads


def vox(*args: str, input: str = ""):
    return CliRunner().invoke(cli.app, list(args), input=input)


def one_line(result, code: int, *needles: str) -> None:
    lines = [x for x in result.stderr.splitlines() if x.strip()]
    assert result.exit_code == code and len(lines) == 1 and lines[0].startswith("vox: "), result.output
    for n in needles:
        assert n in lines[0], lines[0]


def test_say_refuses_a_missing_folder_unless_mkdir(no_model, tmp_path):
    target = tmp_path / "typo" / "deeper" / "x.wav"
    one_line(vox("say", "hi", "-o", str(target)), 2, "does not exist", "--mkdir", str(target.parent))
    assert not (tmp_path / "typo").exists() and not no_model
    vox("say", "hi", "-o", str(target), "--mkdir")  # created, then the (refusing) model load
    assert (tmp_path / "typo" / "deeper").is_dir() and len(no_model) == 1


def test_batch_refuses_a_missing_parent_unless_mkdir(no_model, tmp_path):
    out = tmp_path / "typo" / "out"
    one_line(vox("batch", "-", "-o", str(out), input="hi\n"), 2, "does not exist", "--mkdir")
    assert not (tmp_path / "typo").exists() and not no_model
    vox("batch", "-", "-o", str(out), "--mkdir", input="hi\n")
    assert out.is_dir() and len(no_model) == 1
    vox("batch", "-", "-o", str(tmp_path / "new"), input="hi\n")  # a new leaf folder needs no --mkdir
    assert (tmp_path / "new").is_dir() and len(no_model) == 2


def test_an_unwritable_folder_is_named_with_the_systems_reason(no_model, tmp_path, monkeypatch):
    """A read-only file system (simulated: this test may run as root, whom permissions do not stop)."""
    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(tmp_path))
    monkeypatch.setattr(tempfile, "NamedTemporaryFile", read_only)
    one_line(vox("say", "hi", "-o", str(tmp_path / "x.wav")), 2, "Read-only file system", str(tmp_path))
    assert not no_model


@pytest.mark.parametrize("name", ["x.wav", "x.flac", "x.WAVE"])
def test_raw_pcm_is_never_written_under_an_audio_file_name(no_model, tmp_path, name):
    one_line(vox("say", "hi", "--raw", "-o", str(tmp_path / name)), 2, "--raw", "headerless")
    assert not list(tmp_path.iterdir()) and not no_model


def test_raw_to_a_pcm_name_or_stdout_is_accepted(no_model, tmp_path):
    for i, target in enumerate((str(tmp_path / "x.pcm"), str(tmp_path / "x.raw"), "-")):
        vox("say", "hi", "--raw", "-o", target)
        assert len(no_model) == i + 1, target  # got as far as the model load
