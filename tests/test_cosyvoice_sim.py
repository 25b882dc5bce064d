"""Fun-CosyVoice3-0.5B in the simulator: the cost profile from published sizes with one fitted number
(dit_eff, in the default profile; the optimistic one fits nothing), the shipped TOMLs equal the script's
output, the model gets its own profile, and a short sim bench runs."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner
from voxcli.models.cosyvoice3.sim import COST, build_profile, profile_toml, shipped_dit_eff, terms

from voxcli.config import ConfigError, EngineConfig, recipe_path
from voxcli.engine.estimates import load_profile
from voxcli.sim.cost import CostProfile


def test_profile_arithmetic_and_settings():
    # Qwen2-0.5B's blocks + the 896 x 6761 speech head; DiT 22 x (4 + 4) x 1024^2 x 2 FLOPs x 2 frames x
    # 10 steps x 2 CFG rows = 14.8 GFLOP per token, + attention over the cached history
    q = COST.quantities()
    assert abs(q["params_lm"] / 1e6 - 363.9) < 0.1
    assert 14.7e9 < q["flops_dit"] < 16.5e9
    fitted = shipped_dit_eff(recipe_path("gpus/h100-cosyvoice3-0.5b").read_text())
    assert 0.1 < fitted < 0.5  # below the old unfitted guess (half the FLOP prior): the paper's 30 req/s
    pess, opt = terms("h100", "pessimistic", fitted), terms("h100", "optimistic")
    assert pess["codec_token_ms"] > 2 * opt["codec_token_ms"] and pess["row_ms"] > 6 * opt["row_ms"]
    prof = CostProfile.from_dict(build_profile("h100", "pessimistic", fitted))
    assert prof.latency("codec", 1, 16) > prof.latency("codec", 1)
    with pytest.raises(ValueError):
        terms("h100", "fitted")
    with pytest.raises(ValueError, match="fitted dit_eff"):
        terms("h100", "pessimistic")


def test_shipped_profiles_are_the_script_output():
    shipped = recipe_path("gpus/h100-cosyvoice3-0.5b").read_text()
    assert shipped == profile_toml("h100", "pessimistic", shipped_dit_eff(shipped))
    assert "FITTED so that full 44/88 serves 30 req/s at 90%" in shipped
    optimistic = recipe_path("gpus/h100-optimistic-cosyvoice3-0.5b").read_text()
    assert optimistic == profile_toml("h100", "optimistic")


def test_cosyvoice_gets_its_own_profile():
    cfg = EngineConfig(model="FunAudioLLM/Fun-CosyVoice3-0.5B-2512", gpu="h100")
    assert load_profile(cfg).name == "h100-cosyvoice3-0.5b"
    with pytest.raises(ConfigError, match="b200-cosyvoice3-0.5b"):
        load_profile(cfg.replace(gpu="b200"))


def test_sim_bench_runs_on_the_papers_split(tmp_path, monkeypatch):
    from voxcli import cli

    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    r = CliRunner().invoke(
        cli.app,
        [
            "bench",
            "--executor",
            "sim",
            "--gpu",
            "h100",
            "--model",
            "cosyvoice3-0.5b",
            "--policy",
            "full",
            "--rates",
            "8",
            "--duration",
            "4",
            "--seeds",
            "1",
            "--set",
            "lm_sms=44",
            "--set",
            "codec_sms=88",
            "--out",
            str(tmp_path),
            "--no-plot",
        ],
    )
    assert r.exit_code == 0, r.output
    assert "capacity" in r.output
