"""Experiment plans (voxcli/bench/plans/*.toml, `vox bench --plan NAME`): every shipped plan loads, names
known
workloads and builds an engine config for every candidate; a bad plan fails in one sentence naming the
key; a tiny plan runs end to end on the sim through the real CLI; the breakdown report runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.tiny_plan import TINY
from typer.testing import CliRunner
from voxcli.models.registry import sim_spec_for

from voxcli.bench.plan import SHIPPED_PLANS, PlanError, load_plan
from voxcli.bench.workloads import DERIVED, WORKLOADS
from voxcli.cli import app

PLANS = sorted(SHIPPED_PLANS.glob("*.toml"))


def test_the_sweep_scripts_became_plans():
    assert {p.stem for p in PLANS} >= {"sweep_policies", "paper_points", "late_chunks", "bound_fractions",
                                       "ttfa_breakdown"}


@pytest.mark.parametrize("path", PLANS, ids=[p.stem for p in PLANS])
def test_every_plan_loads_and_builds_every_candidates_config(path):
    plan = load_plan(path)
    assert plan.title and plan.runs(), path
    for c in plan.candidates:
        cfg = plan.config(c)  # a ConfigError here names the bad override
        assert cfg.executor == "sim" and cfg.gpu
        assert sim_spec_for(cfg.model).frame_rate > 0
        for wl in c.workloads:
            assert wl in {**WORKLOADS, **DERIVED}, f"{path.name}: {c.name}: unknown workload {wl}"
            assert c.rates_for(wl)


def _plan(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.toml"
    path.write_text(text)
    return path


def test_a_tiny_plan_runs_end_to_end_through_vox_bench(tmp_path):
    res = CliRunner().invoke(app, ["bench", "--plan", str(_plan(tmp_path, TINY)), "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "seed-tts: capacity req/s" in res.output and "best at 90%" in res.output
    assert "past capacity" in res.output
    out = json.loads((tmp_path / "plan-p.json").read_text())
    assert [r["candidate"] for r in out["rows"]] == ["recipe", "sync2"]
    for r in out["rows"]:
        assert len(r["cap90_seeds"]) == 2 and r["bound"]["rps"] > 0
        assert r["rates"][0]["sent"] > 0
    (over,) = out["overload"]
    assert over["rate"] == round(out["rows"][0]["cap90"]["mean"] * 1.5, 1) or over["capacity90"] == 0


def test_plan_set_overrides_keys_rates_and_candidates(tmp_path):
    plan = load_plan(_plan(tmp_path, TINY), ["duration=3", "seeds=1", "rates.seed-tts=5:15:5", "only=sync2"])
    assert plan.duration == 3.0 and plan.seeds == 1
    assert [c.name for c in plan.candidates] == ["sync2"]
    assert plan.candidates[0].rates_for("seed-tts") == [5.0, 10.0, 15.0]


@pytest.mark.parametrize(("change", "match"), [
    (("duration = 1.0", "durations = 1.0"), "unknown key"),
    (('rates = "20,40"', 'rates = "20:10:5"'), "rates of"),
    (('arrivals = "by-rate"', 'arrivals = "random"'), "arrivals"),
    (('reference = "recipe"', 'reference = "nobody"'), "names no candidate"),
    (('candidates = ["recipe"]', 'candidates = ["nobody"]'), "not candidates"),
    (('tables = ["capacity", "rates"]', 'tables = ["pie"]'), "known tables"),
])
def test_a_bad_plan_fails_naming_the_key(tmp_path, change, match):
    with pytest.raises(PlanError, match=match):
        load_plan(_plan(tmp_path, TINY.replace(*change)))


def test_a_bad_plan_is_a_one_line_cli_error(tmp_path):
    bad = _plan(tmp_path, TINY.replace("seeds = 2", "seedz = 2"))
    res = CliRunner().invoke(app, ["bench", "--plan", str(bad)])
    assert res.exit_code == 2 and "unknown key(s) seedz" in res.output


def test_the_breakdown_report_says_where_ttfa_goes(tmp_path):
    plan = load_plan(SHIPPED_PLANS / "ttfa_breakdown.toml",
                     ["duration=1", "rates=20", "warmup=4", "only=recipe"])
    from voxcli.bench.plan_run import run_plan

    lines: list[str] = []
    out = run_plan(plan, lines.append)
    (row,) = out["rows"]
    assert row["sent"] > 0 and row["parts_ms"]["time to first audio"]["p50"] > 0
    assert any("decode rows per step" in ln for ln in lines)
