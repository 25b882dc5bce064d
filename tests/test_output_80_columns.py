"""What `vox bench --plan` and `vox profile` print fits an 80-column terminal (issue 42: plan lines of 134-148
columns, a 95-column line in `vox profile`): rendered with COLUMNS=80 as a non-terminal console sizes
itself, no line is wider than 80 and no figure is cut (each capacity the JSON holds appears whole)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.tiny_plan import TINY
from typer.testing import CliRunner

from voxcli.bench.plan import SHIPPED_PLANS
from voxcli.cli import app

# every table `vox bench --plan` prints, with a candidate's name as long as a plan may give one
LONG_NAMES = TINY.replace('name = "sync2"', 'name = "a candidate with a long name"')


def run_80(args: list[str]) -> str:
    res = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    return res.output


def assert_fits(text: str) -> None:
    wide = [line for line in text.splitlines() if len(line) > 80]
    assert not wide, wide[:3]


def test_a_plan_run_fits_80_columns_and_keeps_every_capacity_whole(tmp_path):
    plan = tmp_path / "tiny.toml"
    plan.write_text(LONG_NAMES)
    text = run_80(["bench", "--plan", str(plan), "--out", str(tmp_path)])
    assert_fits(text)
    assert "seed-tts: capacity req/s" in text and "best at 90%" in text and "past capacity" in text
    # a sweep's figures stay on one line of their own (a long candidate name goes on the line above)
    figures = [line for line in text.splitlines() if "req/s at 90%" in line]
    assert len(figures) == 2 and all(line.rstrip().endswith("CPU s)") for line in figures), figures
    words = text.split()
    rows = json.loads((tmp_path / "plan-tiny.json").read_text())["rows"]
    for r in rows:
        cell = f"{r['cap90']['mean']:.1f}±{r['cap90']['std']:.1f}"
        assert any(w.lstrip("≥") == cell for w in words), cell  # the figure and its spread, one word


def test_the_breakdown_plan_fits_80_columns(tmp_path):
    text = run_80(["bench", "--plan", "ttfa_breakdown", "--plan-set", "duration=1", "--plan-set", "rates=20",
                   "--plan-set", "warmup=4", "--plan-set", "only=recipe", "--out", str(tmp_path)])
    assert_fits(text)
    assert "decode rows per step" in text and "time to first audio" in text


def test_vox_profile_fits_80_columns_every_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the default --out, out/profile, as a user runs it: the commands it
    text = run_80(["profile", "--gpu", "h100", "--target-rate", "40", "--gpus", "2", "--no-simulate"])
    assert_fits(text)  # prints to paste stay whole lines (a long --out of one's own makes them longer)
    assert "chosen split" in text and "  vox serve --recipe out/profile/qwen3-tts-1.7b-h100.toml" in text


def test_vox_profile_simulating_splits_wraps_its_rate_grid_between_rates(tmp_path, monkeypatch):
    """The grid of rates it simulates (about 20 of them) was one word of bare commas that an 80-column
    terminal cut mid-number; now a line break falls between two rates."""
    import re

    monkeypatch.chdir(tmp_path)
    text = run_80(["profile", "--gpu", "h100", "--keep", "1", "--sim-seeds", "1", "--sim-duration", "0.5"])
    assert_fits(text)
    joined = " ".join(text.split())
    grid = re.search(r"at R = (.*?) req/s:", joined)
    assert grid, joined[:300]
    rates = grid.group(1).split(", ")
    assert len(rates) > 5 and all(re.fullmatch(r"\d+(\.\d+)?", r) for r in rates), rates


def title_room(table) -> tuple[int, int]:
    """(the rendered table's width at 80 columns, the room its title needs: its length, up to 60)."""
    import io

    from rich.console import Console

    buf = io.StringIO()
    Console(file=buf, width=80).print(table)
    return max(map(len, buf.getvalue().splitlines())), min(len(str(table.title or "")), 60)


def test_no_table_squeezes_its_title_into_a_narrow_column():
    """A caption is as wide as its table: `vox profile`'s prefill table once wrapped a 49-character title
    into 13 columns, five lines of it."""
    from voxcli.bench.plan_run import capacity_tables, rate_table
    from voxcli.config import recipe_path
    from voxcli.sim.cost import CostProfile
    from voxcli.sim.splits import LoadShape, choose_split, profile_tables, split_points, split_table
    from voxcli.tables import figure_table

    prof = CostProfile.from_toml(recipe_path("gpus/h100"))
    shape = LoadShape(frames_per_request=120.0, chunks_per_request=12.0)
    points = split_points(prof, 40.0, shape)
    cap = {"mean": 40.0, "std": 1.0, "at_top": False}
    row = {"workload": "seed-tts", "candidate": "recipe", "cap90": cap, "cap99": cap, "bound": None,
           "promoted": 0, "deadline_launches": 0, "slack_cuts": 0, "stalled": 0,
           "rates": [{"rate": 20, "attainment": 1.0, "stalled": 0, "sent": 20, "promoted": 0,
                      "deadline_launches": 0, "slack_cuts": 0, "rejected": 0, "ttfa_p50": 0.1}]}
    tables = [*profile_tables(prof, shape), split_table(points, choose_split(points), 40.0),
              rate_table([row]), *(t for t in capacity_tables([row], "recipe") if not isinstance(t, str))]
    for t in tables:
        width, room = title_room(t)
        assert width >= room, (t.title, width)
    narrow = figure_table("a title of forty characters, give or take", ["n", "ms"], [["1", "2"]])
    width, room = title_room(narrow)
    assert width < room  # the check can fail: a narrow table under a long title


def test_the_check_itself_fails_on_a_wide_line():
    with pytest.raises(AssertionError):
        assert_fits("short\n" + "x" * 81)


def test_a_wheel_carries_the_shipped_plans():
    """`vox bench --plan NAME` from any folder, installed or not: the plans are package data."""
    import tomllib

    root = Path(__file__).resolve().parents[1]
    data = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert SHIPPED_PLANS == root / "voxcli" / "bench" / "plans"
    assert "plans/*.toml" in data["voxcli.bench"]
    shipped = {p.stem for p in SHIPPED_PLANS.glob("*.toml")}
    assert shipped >= {"late_chunks", "sweep_policies", "ttfa_breakdown"}
