"""Higgs Audio v3 4B in the simulator: the shipped H100 profiles are voxcli.models.higgs_audio.sim's output
(one fitted number, row_ms, in the default profile; the optimistic and pessimistic ones fit nothing), the
stand-in has the 8-step delay fill, and `vox bench` / `vox profile` run on it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from voxcli.config import EngineConfig
from voxcli.engine.estimates import load_profile
from voxcli.sim.cost import CostProfile

ROOT = Path(__file__).resolve().parents[1]


def _script():
    from voxcli.models.higgs_audio import sim

    return sim


def test_shipped_profiles_are_the_script_output():
    from voxcli.config import recipe_path

    c = _script()
    fitted = recipe_path("gpus/h100-higgs-v3-4b").read_text()
    row = float(re.search(r"b x row ([0-9.]+) ms", fitted).group(1))
    arith = c.terms("h100", "optimistic")["arith_row_ms"]
    assert arith < row < arith * c.COST.row_inefficiency
    assert fitted == c.profile_toml("h100", "fitted", row)
    for setting in ("optimistic", "pessimistic"):
        assert recipe_path(f"gpus/h100-{setting}-higgs-v3-4b").read_text() == c.profile_toml("h100", setting)
    step = c.COST.quantities()["step_params"]
    assert abs(step / 1e9 - 3.654) < 0.001  # 36 x 100.9 M + the tied 8 x 1026 head
    prof = CostProfile.from_dict(c.build_profile("h100", "fitted", row))
    assert prof.latency("decode", 64) > prof.latency("decode", 1) > 3e-3  # seconds: the 4B backbone
    assert prof.latency("codec", 1, 32) > prof.latency("codec", 1)
    with pytest.raises(ValueError):
        c.terms("h100", "fitted")


def test_higgs_gets_its_own_profile():
    cfg = EngineConfig(model="bosonai/higgs-audio-v3-tts-4b", gpu="h100")
    assert load_profile(cfg).name == "h100-higgs-v3-4b"
    assert load_profile(cfg.replace(gpu="h100-pessimistic")).name == "h100-pessimistic-higgs-v3-4b"


def test_stand_in_has_the_delay_fill():
    from voxcli.models.base import Row, SynthesisRequest

    from voxcli.sim.synthetic import SyntheticProgram

    p = SyntheticProgram.for_model("higgs-v3-4b")
    assert (p.spec.sample_rate, p.spec.samples_per_frame, p.spec.codebooks) == (24000, 960, 8)
    prompt = p.prepare(SynthesisRequest(text="hello there", fixed_frames=3))
    assert prompt.width == 1
    row = Row(0, prompt, [0])
    outs = p.prefill([row]) + [p.decode([row])[0] for _ in range(11)]
    first = next(i for i, o in enumerate(outs) if o.frame is not None)
    assert first == 9 and outs[11].done  # prefill + 8 fill steps, then 3 frames


def test_vox_bench_and_profile_run_on_higgs(tmp_path, monkeypatch):
    from voxcli import cli

    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(
        cli.app,
        [
            "bench",
            "--executor",
            "sim",
            "--gpu",
            "h100",
            "--model",
            "higgs-v3-4b",
            "--policy",
            "full",
            "--rates",
            "4,8",
            "--duration",
            "3",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "capacity" in r.output
    r = CliRunner().invoke(
        cli.app,
        ["profile", "--gpu", "h100", "--model", "higgs-v3-4b", "--no-simulate", "--out", str(tmp_path / "p")],
    )
    assert r.exit_code == 0, r.output
    assert "chosen" in r.output and "h100-higgs-v3-4b.toml" in r.output  # Higgs' own costs, never Qwen's
