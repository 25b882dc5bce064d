"""Refusals that need only a model's name or its config files answer at once, without torch (issue 32,
items 7-8): a typo'd model name with "did you mean", an unknown --voice / --lang with "did you mean"
from the checkpoint's own list, and `vox voices` for every demo family (its modes right: demo-higgs
clones). Each runs `vox` in a fresh interpreter and records what it imported; wall times are for the
benchmarks (benchmarks/measure_startup.py), not asserted here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def run_vox(args: list[str], cwd: Path, cache: Path) -> tuple[int, str, str, set]:
    out = cwd / f"probe-{len(list(cwd.glob('probe-*')))}.json"
    env = {**os.environ, "VOX_PROBE_OUT": str(out), "VOX_CACHE": str(cache), "HF_HUB_OFFLINE": "1",
           "HF_HUB_CACHE": str(cwd / "hub"), "COLUMNS": "100"}
    p = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env, cwd=cwd,
                       timeout=120)
    loaded = set(json.loads(out.read_text())) if out.exists() else set()
    return p.returncode, p.stdout, p.stderr, loaded


@pytest.fixture(scope="module")
def demos(tmp_path_factory, demo_store):
    """A cache with the demo checkpoints built (as a first `vox say -m demo...` would leave it)."""
    return demo_store.cache(tmp_path_factory.mktemp("cache"), "demo", "demo-higgs", "demo-speechlm")


def _one_line(rc: int, err: str, code: int, *needles: str) -> None:
    lines = [x for x in err.splitlines() if x.strip()]
    assert rc == code and len(lines) == 1 and lines[0].startswith("vox: "), err
    for n in needles:
        assert n in lines[0], lines[0]


QWEN = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"


@pytest.mark.parametrize("typo,meant", [("dmeo", "demo"), ("demo-dai", "demo-dia"), (QWEN[:-2] + "e", QWEN)])
def test_a_typod_model_name_is_refused_without_torch(tmp_path, typo, meant):
    rc, _, err, loaded = run_vox(["say", "-m", typo, "hi", "-o", "x.wav"], tmp_path, tmp_path / "cache")
    if "/" in typo:  # a hub id form: not downloaded, and no such model either
        assert rc == 1 and f"did you mean {meant}?" in err, err
    else:
        _one_line(rc, err, 2, typo, f"did you mean {meant}?")
    assert "torch" not in loaded


def test_an_unknown_voice_or_language_is_refused_before_the_model_loads(tmp_path, demos):
    def say(*args: str) -> tuple[int, str, str, set]:
        return run_vox(["say", "-m", "demo", *args, "hi", "-o", "x.wav"], tmp_path, demos)

    rc, _, err, loaded = say("--voice", "dylann")
    _one_line(rc, err, 2, "no voice 'dylann'", "did you mean dylan?")
    assert "torch" not in loaded
    higgs = ["say", "-m", "demo-higgs", "--voice", "ryan", "hi", "-o", "x.wav"]
    rc, _, err, loaded = run_vox(higgs, tmp_path, demos)
    _one_line(rc, err, 2, "no named voices", "drop --voice")
    assert "torch" not in loaded
    rc, _, err, loaded = say("--lang", "englsh")
    _one_line(rc, err, 2, "language 'englsh'", "did you mean english?")
    assert "torch" not in loaded
    (tmp_path / "lines.txt").write_text("Hello there.\n")
    batch = ["batch", "lines.txt", "-m", "demo", "--voice", "zed", "-o", "out"]
    rc, _, err, loaded = run_vox(batch, tmp_path, demos)
    _one_line(rc, err, 2, "no voice 'zed'")
    assert "torch" not in loaded


def _clip(path: Path) -> Path:
    import wave

    with wave.open(str(path), "wb") as w:  # 1 s of silence at 24 kHz: a readable clip
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(24000), w.writeframes(b"\0\0" * 24000)
    return path


@pytest.mark.parametrize("demo,modes", [("demo", "custom_voice"), ("demo-speechlm", "tts")])
def test_a_clip_for_a_model_that_cannot_clone_is_refused_before_it_loads(tmp_path, demos, demo, modes):
    """The new-user pass: `vox say -m demo --ref-audio clip.wav` was refused only after the model loaded
    (117 s under load); the spec's modes say it cannot clone."""
    clip = _clip(tmp_path / "clip.wav")
    rc, _, err, loaded = run_vox(["say", "-m", demo, "--ref-audio", str(clip), "hi", "-o", "x.wav"], tmp_path,
                                 demos)
    _one_line(rc, err, 2, "cannot clone a voice from --ref-audio", f"its modes: {modes}", "drop --ref-audio")
    assert "torch" not in loaded


def test_a_model_that_clones_passes_the_clip_check(demos, monkeypatch):
    from voxcli.cli_preflight import check_clone, describe

    monkeypatch.setenv("VOX_CACHE", str(demos))
    spec = describe("demo-higgs")
    assert spec is not None and spec.clones
    check_clone(spec)  # no refusal: the model takes the clip after it loads


@pytest.mark.parametrize("demo,modes", [("demo", "custom_voice"), ("demo-higgs", "tts, clone"),
                                        ("demo-speechlm", "tts")])
def test_voices_answers_without_torch_for_every_demo_family(tmp_path, demos, demo, modes):
    rc, out, err, loaded = run_vox(["voices", "-m", demo], tmp_path, demos)
    assert rc == 0 and not err.strip(), err  # no extra line, with or without the vox: prefix
    assert "torch" not in loaded and "numpy" not in loaded, demo
    assert f"modes:     {modes}" in out


def test_describe_matches_the_loaded_spec_for_higgs_and_speechlm(demos, monkeypatch):
    """describe (config files only) and load (weights) never disagree, for the families added here."""
    monkeypatch.setenv("VOX_CACHE", str(demos))
    from voxcli.models import describe_config, load_model

    for demo in ("demo-higgs", "demo-speechlm"):
        spec = describe_config(demo)
        assert spec is not None and spec == load_model(demo).spec, demo


def test_cosyvoice_voices_come_from_spk2info_without_torch(tmp_path, cosyvoice_ckpt):
    """CosyVoice 3's saved voices live in a torch pickle (spk2info.pt): read for their names alone."""
    from voxcli.models import describe_config, load_model

    rc, out, err, loaded = run_vox(["voices", "-m", str(cosyvoice_ckpt)], tmp_path, tmp_path / "cache")
    assert rc == 0 and not err.strip(), err
    assert "torch" not in loaded and "numpy" not in loaded
    spec = load_model(str(cosyvoice_ckpt)).spec
    assert f"voices:    {', '.join(spec.voices)}" in out and len(spec.voices) == 2
    assert describe_config(str(cosyvoice_ckpt)) == spec


def test_cosyvoice2_answers_from_its_files_as_the_loaded_program_does(tmp_path, demo_store):
    """CosyVoice 2 (cosyvoice2.yaml, not config.json) also answers `vox voices` without torch, and the
    spec read from its files is the loaded program's."""
    from voxcli.models import describe_config, load_model

    cache = demo_store.cache(tmp_path / "cache", "demo-cosyvoice2")
    path = str(cache / "demo-cosyvoice2")
    spec = describe_config(path)
    assert spec is not None and spec == load_model(path).spec
    rc, out, err, loaded = run_vox(["voices", "-m", "demo-cosyvoice2"], tmp_path, cache)
    assert rc == 0 and not err.strip(), err
    assert "torch" not in loaded and "numpy" not in loaded
    assert f"voices:    {', '.join(spec.voices)}" in out


BENCH = ["bench", "--executor", "cpu", "--rates", "1", "--duration", "1", "--out", "b"]


@pytest.mark.parametrize("command", [BENCH, ["say", "hi", "-o", "x.wav"]])
def test_a_model_folder_that_does_not_exist_is_refused_without_torch(tmp_path, command):
    """The loader finds the folder (models/locate) before it imports torch: a mistyped path is one sentence
    at once, not after seconds of imports."""
    rc, _, err, loaded = run_vox([*command, "--model", "./missing-dir/model"], tmp_path, tmp_path / "cache")
    assert rc != 0 and "does not exist" in err and "missing-dir/model" in err, err
    assert "torch" not in loaded
