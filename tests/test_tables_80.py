"""No table of `vox bench` / `vox profile` cuts a figure in an 80-column terminal (issue 23: "100." and
"50." were cut). Every word of every cell must appear whole on one line of the rendered table."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from rich.console import Console

from voxcli.bench.metrics import RateResult
from voxcli.bench.sweep import SweepResult, SweepSpec, Variant, VariantSweep
from voxcli.config import recipe_path
from voxcli.engine.cost import CostProfile
from voxcli.profile import LoadShape, choose_split, profile_tables, split_points, split_table


def cut_words(table, width: int = 80) -> tuple[list[str], int]:
    buf = io.StringIO()
    Console(file=buf, width=width).print(table)
    lines = buf.getvalue().splitlines()
    words = [w for col in table.columns for cell in col._cells for w in str(cell).split()]
    return [w for w in words if not any(w in line.split() for line in lines)], max(map(len, lines))


@pytest.mark.parametrize("gpu", ["h100", "h200", "b200"])
def test_profile_tables_fit_80_columns(gpu):
    prof = CostProfile.from_toml(recipe_path(f"gpus/{gpu}"))
    shape = LoadShape(frames_per_request=120.0, chunks_per_request=12.0)
    points = split_points(prof, 40.0, shape)
    for t in [*profile_tables(prof, shape), split_table(points, choose_split(points), 40.0)]:
        cut, widest = cut_words(t)
        assert not cut and widest <= 80, (t.title, cut[:5])


def _rr(rate, att):
    return RateResult(rate, 1200, round(1200 * att), 1190, 3, 7, att, 19.8, 19.9, 0.1234, 1.2345, 12.345,
                      1.0, 12, 60.0)


def test_bench_tables_fit_80_columns():
    from voxcli.bench.report import capacity_table, rate_tables

    sws = []
    for label in ("full", "sync2", "lanes"):
        sw = VariantSweep(Variant.policy(label), results=[_rr(20, 1.0), _rr(40, 0.97), _rr(100, 0.5)],
                          wall_s=1234.5)
        sw.per_seed = [[_rr(20, 1.0), _rr(40, 0.97), _rr(100, 0.5)], [_rr(20, 1.0), _rr(40, 0.8)],
                       [_rr(20, 1.0), _rr(40, 1.0), _rr(100, 0.99)]]
        sws.append(sw)
    result = SweepResult(SweepSpec(rates=[20, 40, 100]), sws)
    for t in [*rate_tables(result), capacity_table(result)]:
        cut, widest = cut_words(t)
        assert not cut and widest <= 80, (t.title, cut[:5])


def test_vox_profile_with_columns_80_cuts_no_figure(tmp_path):
    env = {**os.environ, "COLUMNS": "80"}
    p = subprocess.run([sys.executable, "-m", "voxcli", "profile", "--gpu", "h100", "--target-rate", "40",
                        "--no-simulate", "--out", str(tmp_path)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    table_lines = [line for line in p.stdout.splitlines() if line.strip()[:1].isdigit()
                   or line.strip().startswith("*")]
    assert table_lines and all(len(line) <= 80 for line in table_lines)
    assert "…" not in p.stdout
    assert any(line.lstrip().startswith("*") for line in table_lines)  # the chosen split's row
