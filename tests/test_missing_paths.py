"""A path that does not exist reads "does not exist" with the path, in one line, wherever vox reads a
path (issue 23: a missing --ref-audio said "System error.")."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

MISSING = "missing-dir/nothing-here"
CASES = {
    "say --ref-audio": ["say", "-m", "demo", "hi", "-o", "x.wav", "--ref-audio", f"{MISSING}.wav"],
    "say --text-file": ["say", "-m", "demo", "-f", f"{MISSING}.txt", "-o", "x.wav"],
    "batch input": ["batch", "-m", "demo", f"{MISSING}.txt", "-o", "out"],
    "say --recipe": ["say", "-m", "demo", "hi", "-o", "x.wav", "--recipe", f"{MISSING}.toml"],
    "say -m folder": ["say", "-m", f"./{MISSING}", "hi", "-o", "x.wav"],
    "voices -m folder": ["voices", "-m", f"./{MISSING}"],
    "bench --workload": ["bench", "--executor", "sim", "--gpu", "h100", "--workload", f"{MISSING}.tsv",
                         "--rates", "1", "--duration", "1", "--out", "b"],
    "bench --model folder": ["bench", "--executor", "cpu", "--model", f"./{MISSING}", "--rates", "1",
                             "--duration", "1", "--out", "b"],
    "profile --workload": ["profile", "--gpu", "h100", "--workload", f"{MISSING}.tsv", "--out", "p"],
    "profile --model folder": ["profile", "--gpu", "h100", "--model", f"./{MISSING}", "--out", "p"],
    "serve --recipe": ["serve", "-m", "demo", "--recipe", f"{MISSING}.toml", "--port", "1"],
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_missing_path_does_not_exist(tmp_path, name):
    env = {**os.environ, "VOX_CACHE": str(tmp_path / "cache")}
    p = subprocess.run([sys.executable, "-m", "voxcli", *CASES[name]], capture_output=True, text=True,
                       cwd=tmp_path, env=env, timeout=300, stdin=subprocess.DEVNULL)
    err = "\n".join(line for line in p.stderr.splitlines() if not line.startswith("vox: note:"))
    assert p.returncode != 0, (name, p.stderr)
    assert "does not exist" in err and MISSING in err, (name, err)
    assert len(err.strip().splitlines()) == 1, (name, err)
    assert "System error" not in err and "internal error" not in err and "Traceback" not in err, err
