"""`vox profile`'s split table, its bound table, its simulation and the recipe it writes share one config per
split, so their figures agree by construction (issue 32 item 9: the bound table priced the model's own
1-frame first chunk and default limits while the simulation ran the recipe's 5-frame one, 74.2 against a
simulated 89.3; the split table's own throughput model said "keeps up: yes" for Dia at 16.3 req/s against
a bound of 7.2; and Dia was simulated on a 4 req/s grid)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner
from voxcli.models.registry import sim_spec_for

from voxcli.bench.metrics import RateResult
from voxcli.bench.sweep import Variant, VariantSweep
from voxcli.bench.targets import model_config
from voxcli.bench.workloads import load_workload
from voxcli.cli import app
from voxcli.config import model_recipe_config
from voxcli.engine.estimates import load_profile
from voxcli.sim.config_bound import SplitBounds, config_bound
from voxcli.sim.split_search import SimulatedSplit, bound_notes, grid_step, rate_grid
from voxcli.sim.splits import choose_split, max_sustainable_rate, split_points

UTTS = load_workload("libritts")


def _bounds(model: str) -> tuple[SplitBounds, object]:
    base, _ = model_recipe_config(model)
    cfg = model_config(model, "sim", "h100")
    return SplitBounds(base, UTTS, sim_spec_for(model).frame_rate, profile=load_profile(cfg)), cfg


@pytest.mark.parametrize("model", ["qwen3-tts-1.7b", "dia-1.6b"])
def test_each_splits_bound_is_vox_benchs_bound_of_that_split(model):
    bounds, cfg = _bounds(model)
    prof = load_profile(cfg)
    points = split_points(prof, 10.0, _shape(model), capacities=bounds.capacities)
    for p in points[::3]:
        bench = config_bound(model_config(model, "sim", "h100", ["policy=full", f"lm_sms={p.lm_sms}",
                                                                 f"codec_sms={p.codec_sms}"]),
                             UTTS, sim_spec_for(model).frame_rate)
        assert (p.lm_capacity_rps, p.codec_capacity_rps) == (bench.lm_rps, bench.codec_rps), p.name
        assert bounds(p.lm_sms, p.codec_sms) == bench


def _shape(model: str):
    from voxcli.bench.workloads import estimate_frames
    from voxcli.sim.splits import load_shape

    sim = sim_spec_for(model)
    return load_shape([estimate_frames(u.text, sim.frame_rate) for u in UTTS], sim.chunk)


def test_no_split_keeps_up_with_a_load_above_its_bound():
    bounds, cfg = _bounds("dia-1.6b")
    prof, shape = load_profile(cfg), _shape("dia-1.6b")
    best = max_sustainable_rate(prof, shape, capacities=bounds.capacities)
    assert 6.5 < best < 8.0  # the TTFA caps Dia's step (bound.py assumption 2b): ~7 req/s, never 16
    assert not any(p.keeps_up for p in split_points(prof, 16.3, shape, capacities=bounds.capacities))
    points = split_points(prof, best, shape, capacities=bounds.capacities)
    chosen = choose_split(points)
    assert chosen.keeps_up and chosen.sustainable_rps == pytest.approx(best)
    assert all(p.sustainable_rps >= best for p in points if p.keeps_up)


def test_vox_profile_prints_the_bound_of_the_recipe_it_writes(tmp_path):
    res = CliRunner().invoke(app, ["profile", "--gpu", "h100", "--model", "dia-1.6b", "--no-simulate",
                                   "--target-rate", "16.3", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    split_rows = [line.split() for line in res.output.splitlines() if line.split()[:1]
                  and "/" in line.split()[0] and line.split()[0].lstrip("*")[:1].isdigit()]
    keeps = [row[-1] for row in split_rows if row[-1] in ("yes", "no")]
    assert keeps and set(keeps) == {"no"}  # 16.3 req/s is past every split's bound
    # the bound table's 112/16 row is `vox bench`'s bound of the shipped recipe (first chunk 12 frames)
    cfg = model_config("dia-1.6b", "sim", "h100")
    full = config_bound(cfg, load_workload("libritts"), sim_spec_for(cfg.model).frame_rate)
    row = next(r for r in split_rows if r[0] == "112/16" and r[-1] == "backbone")
    assert row[-2] == f"{full.rps:.1f}" and "no split sustains this load" in " ".join(res.output.split())


@pytest.mark.parametrize("bound, step", [(7.2, 0.25), (82.0, 4.0), (48.6, 2.0), (0.9, 0.04)])
def test_the_rate_grid_is_fine_enough_for_the_bound(bound, step):
    assert grid_step(bound) == pytest.approx(step)
    rates, got = rate_grid(bound)
    assert got == pytest.approx(step) and got <= bound / 20
    assert rates[0] <= 0.3 * bound and rates[-1] >= 1.2 * bound  # from low load to past the bound / 0.9
    fine = [r for r in rates if r >= 0.5 * bound]
    assert all(b - a == pytest.approx(step) for a, b in zip(fine, fine[1:], strict=False))


def _rate(rate: float, goodput: float, promoted: int = 0) -> RateResult:
    return RateResult(rate, 100, 95, 95, 0, 0, 0.95, goodput, goodput, 0.1, 0.15, 0.18, 1.0, 0, 10.0,
                      promoted=promoted)


def test_a_capacity_above_its_bound_names_the_assumption_that_differs():
    bounds, _ = _bounds("qwen3-tts-1.7b")
    b = bounds(80, 48)  # the codec binds here
    assert b.binding == "codec"
    top = b.rps * 1.2

    def tried(goodput: float, promoted: int) -> SimulatedSplit:
        sw = VariantSweep(Variant("80/48"), results=[_rate(b.rps / 2, b.rps / 2),
                                                     _rate(top, goodput, promoted), _rate(top + 4, 0.0)])
        sw.results[-1].attainment = 0.5
        sw.per_seed = [sw.results]
        point = next(p for p in split_points(load_profile(bounds.config_for(80, 48)), 40.0, _shape(
            "qwen3-tts-1.7b"), capacities=bounds.capacities) if p.codec_sms == 48)
        return SimulatedSplit(point, 80, 48, sw)

    (offered,) = {n for n in bound_notes([tried(b.rps * 0.95, 0)], bounds, 10.0) if "@90%" in n}
    assert "offered load" in offered
    (promoted,) = {n for n in bound_notes([tried(b.rps * 1.15, 500)], bounds, 10.0) if "@90%" in n}
    assert "assumption 4" in promoted and "500 later chunks" in promoted
    (window,) = {n for n in bound_notes([tried(b.rps * 1.15, 0)], bounds, 10.0) if "@90%" in n}
    assert "sustained" in window and "--sim-duration" in window and "assumption 4" not in window
    (long,) = bound_notes([tried(b.rps * 1.15, 500)], bounds, 600.0)  # a window of many request lives
    assert "assumption 4" in long and "--sim-duration" not in long
    within = VariantSweep(Variant("80/48"), results=[_rate(b.rps * 0.9, b.rps * 0.9)])
    within.per_seed = [within.results]
    assert bound_notes([SimulatedSplit(tried(0, 0).point, 80, 48, within)], bounds, 10.0) == []


def test_a_model_that_writes_text_first_is_bounded_at_its_recipes_slo():
    bounds, cfg = _bounds("bagpiper-8b")
    assert bounds.ttfa_s == cfg.ttfa_target_s == 1.0  # its text plan alone takes longer than 200 ms
    prof, shape = load_profile(cfg), _shape("bagpiper-8b")
    assert max_sustainable_rate(prof, shape, capacities=bounds.capacities) > 0.5
    # a split whose bound is 0 keeps up with nothing, not even a target load of 0
    assert not any(p.keeps_up for p in split_points(prof, 0.0, shape, capacities=lambda lm, c: (0.0, 5.0)))
