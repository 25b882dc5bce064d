"""The memory plan and --dtype at the command line, on the demo model (tiny random Qwen3-TTS weights):
--verbose puts the plan (pages, positions, slots, bytes) under the timing line, a memory share too small
for one request is one sentence with the numbers (exit 2, nothing synthesized), --dtype picks the dtype
and refuses an unknown one naming the accepted values."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from voxcli import cli, console


@pytest.fixture(scope="module")
def vox(tmp_path_factory):
    root = tmp_path_factory.mktemp("vox_cache")
    old = os.environ.get("VOX_CACHE")
    os.environ["VOX_CACHE"] = str(root)

    def run(*args: str):
        console.STATE = console._State()
        return CliRunner().invoke(cli.app, list(args))
    yield run
    if old is None:
        os.environ.pop("VOX_CACHE", None)
    else:
        os.environ["VOX_CACHE"] = old


def test_verbose_prints_the_plan_under_the_timing_line(vox, tmp_path: Path):
    out = tmp_path / "x.wav"
    r = vox("say", "-m", "demo", "--greedy", "--max-frames", "4", "--verbose", "Hello there.", "-o", str(out))
    assert r.exit_code == 0, r.output
    lines = r.stderr.splitlines()
    timing = next(i for i, line in enumerate(lines) if "TTFA" in line)
    plan = lines[timing + 1]
    assert plan.strip().startswith("memory plan:") and "KV pages" in plan and "positions" in plan
    assert "codec slots" in plan and "GB usable" in plan and "available RAM" in plan
    quiet = vox("say", "-m", "demo", "--greedy", "--max-frames", "4", "Hello there.", "-o", str(out))
    assert quiet.exit_code == 0 and "memory plan" not in quiet.stderr


def test_too_little_memory_is_one_sentence_before_synthesis(vox, tmp_path: Path):
    out = tmp_path / "x.wav"
    r = vox("say", "-m", "demo", "--max-frames", "4", "--set", "memory_fraction=0.0000001", "Hello.",
            "-o", str(out))
    assert r.exit_code == 2
    err = [line for line in r.stderr.splitlines() if "one request" in line]
    assert len(err) == 1 and "GB" in err[0] and "memory_fraction" in err[0]
    assert "Traceback" not in r.stderr and not out.exists()


def test_dtype_flag(vox, tmp_path: Path):
    out = tmp_path / "x.wav"
    ok = vox("say", "-m", "demo", "--greedy", "--max-frames", "4", "--dtype", "bfloat16", "Hi.",
             "-o", str(out))
    assert ok.exit_code == 0, ok.output
    bad = vox("say", "-m", "demo", "--dtype", "fp8", "Hello.", "-o", str(out))
    assert bad.exit_code == 2 and "dtype must be one of auto, float32, bfloat16" in bad.stderr
