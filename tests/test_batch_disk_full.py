"""`vox batch` on a full disk: one sentence naming the output and its free space, no `.part` left, no
torn manifest line, every audio file on disk listed in the manifest, and a resume after space is freed
finishes the rest. Twice: a full disk stood in for in-process (always runs), and a real 1 MB tmpfs
(runs where this process may mount one: root on Linux)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support.cli_harness import DemoHarness

import voxcli.batch as batch_mod
from voxcli.audio import FileSink

ITEMS = 14
FRAMES = 40  # at most 40 demo frames = 3.2 s = 150 KB of 24 kHz PCM16: under 13 items fill 1 MB


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    h = DemoHarness(tmp_path_factory.mktemp("disk_full_cache"))
    yield h
    h.close()


def _argv(inp: Path, out: Path, frames: int = FRAMES) -> list[str]:
    return ["batch", "-m", "demo", "-q", "--greedy", "--max-frames", str(frames), "-c", "4", str(inp),
            "-o", str(out)]


def _input(tmp_path: Path) -> Path:
    inp = tmp_path / "in.tsv"
    inp.write_text("".join(f"item{i:02d}\tSentence number {i} is spoken here.\n" for i in range(ITEMS)))
    return inp


def _check_consistent(out: Path) -> dict[str, dict]:
    """No .part, every manifest line whole JSON, every audio file listed as ok; the ok records."""
    assert not [p.name for p in out.iterdir() if p.name.endswith(".part")]
    raw = (out / "manifest.jsonl").read_bytes()
    assert raw == b"" or raw.endswith(b"\n"), raw[-80:]
    records = [json.loads(line) for line in raw.decode().splitlines()]
    ok = {r["id"]: r for r in records if r["status"] == "ok"}
    on_disk = {p.stem for p in out.glob("*.wav")}
    assert on_disk <= set(ok), f"audio files the manifest does not list: {sorted(on_disk - set(ok))}"
    for r in ok.values():
        assert (out / r["file"]).is_file(), r
    return ok


def _check_disk_full_run(r, out: Path) -> dict[str, dict]:
    where = f"exit {r.code}, stderr {r.stderr!r}"
    assert r.exception is None, f"{where}: {r.exception!r}"
    assert r.code == 1, where
    last = [x for x in r.stderr.splitlines() if x.strip()][-1]
    assert last.startswith(f"vox: error: the disk holding {out} is full (") and " free)" in last, where
    assert "internal error" not in r.stderr and "System error" not in r.stderr, where
    ok = _check_consistent(out)
    assert 0 < len(ok) < ITEMS, sorted(ok)
    records = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert not [x for x in records if x["status"] == "error"], "a full disk was blamed on an item"
    return ok


class _Budget:
    """A disk with `left` bytes free, shared by the audio files and the manifest."""

    def __init__(self, left: int) -> None:
        self.left = left

    def take(self, n: int) -> int:
        got = max(0, min(n, self.left))
        self.left -= got
        return got


def test_disk_full_in_process_then_resume(harness, tmp_path, monkeypatch):
    budget = _Budget(4 * 150_000)
    real_write = os.write

    class FullSink(FileSink):
        def write(self, pcm: np.ndarray) -> None:
            need = 2 * np.asarray(pcm).size
            if budget.take(need) < need:
                raise RuntimeError("System error.")  # what libsndfile says on ENOSPC
            super().write(pcm)

    def manifest_write(fd: int, data: bytes) -> int:
        got = budget.take(len(data))
        if got == 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data[:got])  # a short write: the line would be torn

    monkeypatch.setattr(batch_mod, "FileSink", FullSink)
    monkeypatch.setattr(batch_mod, "_write", manifest_write)
    # libsndfile's "System error." counts as a full disk only when the disk is nearly full: this one is
    real_usage = batch_mod.shutil.disk_usage
    monkeypatch.setattr(batch_mod.shutil, "disk_usage",
                        lambda p: real_usage(p)._replace(free=max(0, budget.left)))
    inp, out = _input(tmp_path), tmp_path / "out"
    first = _check_disk_full_run(harness.run(_argv(inp, out)), out)

    budget.left = 10**12  # space freed
    r = harness.run(_argv(inp, out))
    assert r.code == 0, r.stderr
    ok = _check_consistent(out)
    assert len(ok) == ITEMS and set(first) <= set(ok)


def test_a_torn_last_line_from_a_killed_run_is_cut_before_appending(harness, tmp_path):
    inp, out = _input(tmp_path), tmp_path / "out"
    out.mkdir()
    (out / "manifest.jsonl").write_text('{"id": "item00", "status": "ok", "fi')  # killed mid-write
    r = harness.run(_argv(inp, out, frames=2))
    assert r.code == 0, r.stderr
    assert len(_check_consistent(out)) == ITEMS


def _mount_tmpfs(where: Path, size: str) -> str | None:
    """None when mounted; else why not."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return "mounting a tmpfs needs root on Linux"
    where.mkdir(exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                       capture_output=True, text=True)
    return None if r.returncode == 0 else f"mount -t tmpfs is not permitted here: {r.stderr.strip()}"


def test_disk_full_on_a_real_1mb_tmpfs_then_resume(harness, tmp_path):
    mnt = tmp_path / "mnt"
    why = _mount_tmpfs(mnt, "1m")
    if why:
        pytest.skip(why)
    try:
        inp, out = _input(tmp_path), mnt / "out"
        first = _check_disk_full_run(harness.run(_argv(inp, out)), out)
        again = _check_disk_full_run(harness.run(_argv(inp, out)), out)  # rerun, disk still full
        assert set(again) >= set(first)
        subprocess.run(["mount", "-o", "remount,size=16m", str(mnt)], check=True)  # space freed
        r = harness.run(_argv(inp, out))
        assert r.code == 0, r.stderr
        ok = _check_consistent(out)
        assert len(ok) == ITEMS and set(first) <= set(ok)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_quiet_batch_with_failures_still_says_so(harness, tmp_path):
    inp = tmp_path / "in.txt"
    inp.write_bytes(b"Good line here.\n\x01\x02\n")
    r = harness.run(["batch", "-m", "demo", "-q", "--greedy", "--max-frames", "4", str(inp), "-o",
                     str(tmp_path / "out")])
    assert r.code == 1
    assert "1 written, 1 failed" in r.stderr and "only control characters" in r.stderr, r.stderr
