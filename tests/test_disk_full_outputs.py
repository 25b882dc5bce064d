"""A disk that is full when audio is written: `vox say` says the disk is full (not "sentence 1 of 20:
System error.", libsndfile's only word for it), and `vox batch` into a disk full from the start leaves
no `.part` behind (the header write failed after the file was created, and the file stayed). The full
disk is stood in for in-process, as in test_batch_disk_full: libsndfile's failure plus a file system
with nothing free."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from support.cli_harness import DemoHarness

soundfile = pytest.importorskip("soundfile")

SENTENCES = " ".join(f"Sentence number {i} is here." for i in range(20))


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    h = DemoHarness(tmp_path_factory.mktemp("disk_full_outputs_cache"))
    yield h
    h.close()


@pytest.fixture
def no_space(monkeypatch):
    real_usage = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real_usage(p)._replace(free=0))


def _last_line(stderr: str) -> str:
    return [x for x in stderr.splitlines() if x.strip()][-1]


def test_vox_say_to_a_full_disk_says_the_disk_is_full(harness, tmp_path, monkeypatch, no_space):
    def full_write(self: Any, data: Any) -> int:
        raise RuntimeError("System error.")  # what libsndfile says on ENOSPC

    monkeypatch.setattr(soundfile.SoundFile, "write", full_write)
    out = tmp_path / "say.wav"
    r = harness.run(["say", "-m", "demo", "-q", "--greedy", "--max-frames", "4", SENTENCES, "-o", str(out)])
    assert r.code == 1 and r.exception is None, (r.code, r.stderr, r.exception)
    last = _last_line(r.stderr)
    assert last.startswith(f"vox: error: the disk holding {tmp_path} is full (0 KB free)"), last
    assert "sentence" not in last and "System error" not in last, last
    assert not list(tmp_path.iterdir())  # neither the file nor its .part


def test_vox_batch_into_a_disk_full_from_the_start_leaves_no_part(harness, tmp_path, monkeypatch, no_space):
    real_init = soundfile.SoundFile.__init__

    def full_open(self: Any, file: Any, *args: Any, **kwargs: Any) -> None:
        Path(file).write_bytes(b"")  # the file is created, then its header cannot be written
        raise RuntimeError(f"Error opening {file!r}: System error.")

    monkeypatch.setattr(soundfile.SoundFile, "__init__", full_open)
    inp = tmp_path / "in.txt"
    inp.write_text("".join(f"Line number {i} here.\n" for i in range(6)))
    out = tmp_path / "out"
    try:
        r = harness.run(["batch", "-m", "demo", "-q", "--greedy", "--max-frames", "4", "-c", "3", str(inp),
                         "-o", str(out)])
    finally:
        monkeypatch.setattr(soundfile.SoundFile, "__init__", real_init)
    assert r.code == 1 and r.exception is None, (r.code, r.stderr, r.exception)
    assert _last_line(r.stderr).startswith(f"vox: error: the disk holding {out} is full"), r.stderr
    assert not [p.name for p in out.iterdir() if p.name.endswith(".part")]
