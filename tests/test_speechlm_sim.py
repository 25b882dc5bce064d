"""Bagpiper-8B / OpusLM-7B in the simulator: the shipped H100 profiles are voxcli.models.speechlm.sim's
output (nothing fitted; the text plan assumed 64 tokens optimistic, 256 pessimistic), their headers state
the TTFA floor the text plan sets (above 200 ms: the default SLO cannot be met by construction), and
`vox bench --executor sim` runs on both models, with `--ttfa-slo` naming the bound in its report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from voxcli.config import EngineConfig, recipe_path
from voxcli.engine.estimates import load_profile

ROOT = Path(__file__).resolve().parents[1]


def _script():
    from voxcli.models.speechlm import sim

    return sim


@pytest.mark.parametrize("model", ["bagpiper-8b", "opuslm-7b"])
def test_shipped_profiles_are_the_script_output_and_state_the_ttfa_floor(model):
    c = _script()
    for setting, name in (("pessimistic", f"gpus/h100-{model}"),
                          ("optimistic", f"gpus/h100-optimistic-{model}")):
        text = recipe_path(name).read_text()
        assert text == c.COSTS[model].profile_toml("h100", setting)
        plan = int(re.search(r"text plan assumed: (\d+) tokens", text).group(1))
        floor = float(re.search(r"TTFA at an empty server >= (\d+) ms", text).group(1))
        assert plan == c.TEXT_PLAN[setting]
        assert floor > max(200, plan * 5)  # >= 5 ms per text step on an 8B / 7B backbone
    t = c.COSTS[model].terms("h100", "optimistic")
    by_hand = (t["prefill_ms"] + 60 * t["prefill_token_ms"] + 64 * (t["floor_ms"] + t["row_ms"])
               + 18 * (t["floor_ms"] + 2 * t["row_ms"]))
    assert abs(c.PLAN.ttfa_ms(t, "optimistic", 0.0) - by_hand) < 1e-9


def test_each_model_gets_its_own_profile():
    assert load_profile(EngineConfig(model="bagpiper-8b", gpu="h100")).name == "h100-bagpiper-8b"
    assert load_profile(EngineConfig(model="opuslm-7b", gpu="h100-optimistic")).name == \
        "h100-optimistic-opuslm-7b"


@pytest.mark.parametrize("model", ["bagpiper-8b", "opuslm-7b"])
def test_vox_bench_sim_runs_and_reports_capacity_at_the_named_ttfa(tmp_path, monkeypatch, model):
    from voxcli import cli

    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli.app, ["bench", "--executor", "sim", "--gpu", "h100", "--model", model,
                                     "--rates", "0.5", "--duration", "4", "--seeds", "1", "--warmup", "0",
                                     "--ttfa-slo", "1.0", "--no-plot", "--out", str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    assert "SLO capacity (TTFA <= 1000 ms" in r.output and "capacity @90%" in r.output
    data = json.loads(next((tmp_path / "b").glob("*.json")).read_text())
    assert data["spec"]["ttfa_target_s"] == 1.0
    bad = CliRunner().invoke(cli.app, ["bench", "--executor", "sim", "--gpu", "h100", "--model", model,
                                       "--ttfa-slo", "0", "--no-plot"])
    assert bad.exit_code == 2 and "--ttfa-slo must be a finite number above 0" in bad.output
