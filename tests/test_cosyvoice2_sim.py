"""CosyVoice2-0.5B in the simulator: the cost profile from published sizes with nothing fitted (the
pessimistic setting carries over CosyVoice 3's fitted flow efficiency, stated in its header), the shipped
TOMLs equal the script's output, the model gets its own profile, and a short sim bench runs."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner
from voxcli.models.cosyvoice2.sim import COST, carried_flow_eff, profile_toml, shipped_flow_eff, terms

from voxcli.config import EngineConfig, recipe_path
from voxcli.engine.estimates import load_profile


def test_profile_arithmetic_and_settings():
    # Qwen2-0.5B's blocks + the 896 x 6564 head; UNet 14 levels x 4 blocks (+ convs) x 2 frames x 10 steps x
    # 2 CFG rows ~ 6 GFLOP per token, a 512-wide conformer ~0.1 GFLOP
    q = COST.quantities()
    assert abs(q["params_lm"] / 1e6 - 363.7) < 0.1
    assert 5e9 < q["flops_unet"] < 8e9 and 0.05e9 < q["flops_encoder"] < 0.2e9
    pess, opt = terms("h100", "pessimistic", carried_flow_eff()), terms("h100", "optimistic")
    assert pess["codec_token_ms"] > 2 * opt["codec_token_ms"] and pess["row_ms"] > 6 * opt["row_ms"]
    with pytest.raises(ValueError, match="flow efficiency"):
        terms("h100", "pessimistic")


def test_shipped_profiles_are_the_script_output():
    shipped = recipe_path("gpus/h100-cosyvoice2-0.5b").read_text()
    assert shipped_flow_eff(shipped) == carried_flow_eff()  # CosyVoice 3's fitted value, not refitted
    assert shipped == profile_toml("h100", "pessimistic", shipped_flow_eff(shipped))
    optimistic = recipe_path("gpus/h100-optimistic-cosyvoice2-0.5b").read_text()
    assert optimistic == profile_toml("h100", "optimistic")


def test_cosyvoice2_gets_its_own_profile_and_a_sim_bench_runs(tmp_path, monkeypatch):
    from voxcli import cli

    assert load_profile(EngineConfig(model="FunAudioLLM/CosyVoice2-0.5B", gpu="h100")).name == (
        "h100-cosyvoice2-0.5b")
    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    args = ["bench", "--executor", "sim", "--gpu", "h100", "--model", "cosyvoice2-0.5b", "--policy", "full",
            "--rates", "8", "--duration", "4", "--seeds", "1", "--out", str(tmp_path), "--no-plot"]
    r = CliRunner().invoke(cli.app, args)
    assert r.exit_code == 0, r.output
    assert "capacity" in r.output
