"""Startup discipline (issue 23): `vox --help`, `vox models`, `vox voices -m demo` and a batch rerun with
nothing to do never import torch (about 4.5 s of a loaded machine's wall time), and neither do
help pages or error handling. Also the typer-version robustness of `--debug` and of help into a closed
pipe. Wall times themselves are measured by benchmarks/measure_startup.py, not here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "fastapi", "uvicorn", "matplotlib", "safetensors")

# Runs `vox ARGS...` in a fresh interpreter and writes, at exit, the top-level packages it imported.
PROBE = """
import atexit, json, os, sys
def dump():
    with open(os.environ["VOX_PROBE_OUT"], "w") as f:
        json.dump(sorted({m.split(".")[0] for m in sys.modules}), f)
atexit.register(dump)
sys.argv = ["vox", *sys.argv[1:]]
from voxcli.cli import main
main()
"""


def run_vox(args: list[str], tmp_path: Path, env: dict[str, str] | None = None) -> tuple[int, str, str, set]:
    out = tmp_path / f"probe-{len(list(tmp_path.glob('probe-*')))}.json"
    full_env = {**os.environ, "VOX_PROBE_OUT": str(out), "COLUMNS": "100", **(env or {})}
    p = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=full_env,
                       cwd=tmp_path, timeout=120)
    loaded = set(json.loads(out.read_text())) if out.exists() else set()
    return p.returncode, p.stdout, p.stderr, loaded


def heavy(loaded: set) -> set:
    return {m for m in HEAVY if m in loaded}


@pytest.mark.parametrize("args", [["--help"], ["say", "--help"], ["batch", "--help"], ["serve", "--help"],
                                  ["bench", "--help"], ["profile", "--help"], ["--version"]])
def test_help_imports_nothing_heavy(tmp_path, args):
    rc, out, err, loaded = run_vox(args, tmp_path)
    assert rc == 0, err
    assert not heavy(loaded) and "numpy" not in loaded, (args, heavy(loaded))


def test_models_imports_no_torch(tmp_path):
    rc, out, err, loaded = run_vox(["models"], tmp_path, {"VOX_CACHE": str(tmp_path / "cache"),
                                                          "HF_HUB_CACHE": str(tmp_path / "hub")})
    assert rc == 0, err
    assert "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice" in out
    assert not heavy(loaded), heavy(loaded)
    assert "numpy" not in loaded and not {"httpx", "httpx2"} & loaded  # nothing cached: no download stack


def test_voices_demo_reads_config_without_torch(tmp_path, monkeypatch):
    from voxcli.models import demo_checkpoint, load_model

    cache = tmp_path / "cache"
    monkeypatch.setenv("VOX_CACHE", str(cache))
    demo_checkpoint("demo")  # built once, as the first `vox say -m demo` would
    rc, out, err, loaded = run_vox(["voices", "-m", "demo"], tmp_path, {"VOX_CACHE": str(cache)})
    assert rc == 0, err
    assert not heavy(loaded) and "numpy" not in loaded, heavy(loaded)
    spec = load_model("demo").spec  # the loaded program describes the same voices and languages
    assert f"voices:    {', '.join(spec.voices)}" in out
    assert f"modes:     {', '.join(spec.modes)}" in out
    assert f"audio:     {spec.sample_rate} Hz" in out


def test_describe_matches_the_loaded_spec_for_every_family(tmp_path, tiny_custom_voice):
    """describe_model (config files only) and load_model (weights) must never disagree."""
    from voxcli.models import describe_model, load_model
    from voxcli.models.dia.tiny import build_tiny

    dia = tmp_path / "dia"
    build_tiny(dia, size="tiny")
    for root in (tiny_custom_voice, dia):
        assert describe_model(str(root)) == load_model(str(root)).spec, root


def test_batch_rerun_with_nothing_to_do_loads_no_model(tmp_path):
    from voxcli.batch import MANIFEST
    from voxcli.text import read_batch_inputs

    lines = tmp_path / "lines.txt"
    lines.write_text("Hello there.\nHow are you?\n")
    out = tmp_path / "out"
    out.mkdir()
    records = []
    for item in read_batch_inputs([str(lines)]):  # a finished earlier run: files + manifest
        (out / f"{item.id}.wav").write_bytes(b"RIFF")
        records.append({"id": item.id, "status": "ok", "file": f"{item.id}.wav",
                        "fingerprint": item.fingerprint(), "duration_s": 1.0})
    (out / MANIFEST).write_text("".join(json.dumps(r) + "\n" for r in records))
    rc, _, err, loaded = run_vox(["batch", "-m", "demo", str(lines), "-o", str(out)], tmp_path,
                                 {"VOX_CACHE": str(tmp_path / "cache")})
    assert rc == 0, err
    assert "0 written, 0 failed, 2 already done" in err
    assert not heavy(loaded), heavy(loaded)
    assert not (tmp_path / "cache").exists()  # not even the demo was built


def test_debug_on_a_user_error_shows_the_traceback_of_that_error(tmp_path):
    """`vox --debug` used to end in AttributeError: typer._click.exceptions has no Abort (typer 0.29)."""
    rc, _, err, _ = run_vox(["--debug", "say", "--seed", "-5", "hi", "-o", "x.wav"], tmp_path)
    assert rc != 0
    assert "VoxError" in err and "--seed must be" in err
    assert "AttributeError" not in err
    rc, _, err, _ = run_vox(["say", "--seed", "-5", "hi", "-o", "x.wav"], tmp_path)  # without: one line
    assert rc == 2 and err.strip().splitlines() == [err.strip()] and "Traceback" not in err


def test_debug_on_a_usage_error_is_one_line(tmp_path):
    rc, _, err, _ = run_vox(["--debug", "say", "--no-such-flag"], tmp_path)
    assert rc == 2 and err.startswith("vox: error: ") and "Traceback" not in err, err


@pytest.mark.parametrize("args", [["say", "--help"], ["--help"], ["models"]])
def test_help_into_a_closed_pipe_exits_0_without_a_traceback(tmp_path, args):
    """`vox say --help | head -1`: the reader left early. Made deterministic by closing the read end
    before vox writes anything."""
    r, w = os.pipe()
    os.close(r)
    env = {**os.environ, "VOX_PROBE_OUT": str(tmp_path / "p.json"), "VOX_CACHE": str(tmp_path / "cache")}
    try:
        p = subprocess.run([sys.executable, "-c", PROBE, *args], stdout=w, stderr=subprocess.PIPE, text=True,
                           env=env, cwd=tmp_path, timeout=120)
    finally:
        os.close(w)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "Error" not in p.stderr, p.stderr


def test_help_piped_to_head_under_pipefail(tmp_path):
    cmd = f"set -o pipefail; {sys.executable} -m voxcli say --help | head -1"
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
