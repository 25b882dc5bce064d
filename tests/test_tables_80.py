"""No table of `vox bench` / `vox profile` / `vox models` cuts a figure in an 80-column terminal (issue 23:
"100." and "50." were cut; issue 32: the per-rate table printed 100 as "10", dropped its last column and
broke headers mid-word, "rej/ect/ed"). Every word of every cell and header must appear whole on one line of
the rendered table, through rich's own rendering at the console's width."""

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
from voxcli.sim.cost import CostProfile
from voxcli.sim.splits import LoadShape, choose_split, profile_tables, split_points, split_table


def cut_words(table, width: int = 80) -> tuple[list[str], int]:
    buf = io.StringIO()
    Console(file=buf, width=width).print(table)
    lines = buf.getvalue().splitlines()
    words = [w for col in table.columns for cell in (col.header, *col._cells) for w in str(cell).split()]
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
    from voxcli.bench.report import bound_table, capacity_table, rate_tables

    sws = []
    for label in ("full", "sync2", "lanes"):
        sw = VariantSweep(Variant.policy(label), results=[_rr(20, 1.0), _rr(40, 0.97), _rr(100, 0.5)],
                          wall_s=1234.5)
        sw.per_seed = [[_rr(20, 1.0), _rr(40, 0.97), _rr(100, 0.5)], [_rr(20, 1.0), _rr(40, 0.8)],
                       [_rr(20, 1.0), _rr(40, 1.0), _rr(100, 0.99)]]
        sws.append(sw)
    result = SweepResult(SweepSpec(rates=[20, 40, 100]), sws)
    # a bound table whose cells are lower bounds ("≥0.73": the new-user pass saw "≥" wrap off its figure)
    bound = {"rps": 54.8, "binding": "time-shared", "lm_rps": 54.8, "codec_rps": 23.3,
             "best_decode_batch": 104, "lm_frames_s": 5497.8, "codec_frames_s": 15394.9,
             "best_codec_batch": 32, "prefill_s": 0.0034, "step_cap_s": 0.0095, "step_s": 0.0094,
             "schedule_cap_s": 0.0073, "best_requests": 52.0, "capped": True}
    result.meta["bounds"] = {label: bound for label in ("full", "sync2", "lanes")}
    assert any(c.startswith("≥") for c in bound_table(result).columns[-2]._cells)
    for t in [*rate_tables(result), capacity_table(result), bound_table(result)]:
        cut, widest = cut_words(t)
        assert not cut and widest <= 80, (t.title, cut[:5])
    buf = io.StringIO()
    Console(file=buf, width=80).print(bound_table(result))
    for cell in (c for col in bound_table(result).columns[1:] for c in col._cells):
        # no cell split over lines
        assert any(str(cell) in line for line in buf.getvalue().splitlines()), cell


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


def _wide(rate, att):  # five-digit counts and latencies, each figure a word no other cell has
    return RateResult(rate, 12001, round(12001 * att), 11900, 1234, 7, att, 119.8, 119.9, 0.1234, 1.2345,
                      12.345, 1.0, 12, 60.0)


@pytest.mark.parametrize("width", [80, 200])
def test_the_per_rate_table_keeps_every_figure_and_header_word_whole(width):
    from voxcli.bench.report import RATE_HEADERS, rate_tables

    sw = VariantSweep(Variant.policy("full"), results=[_wide(120, 1.0), _wide(140, 0.97)])
    (table,) = rate_tables(SweepResult(SweepSpec(rates=[120, 140]), [sw]))
    cut, widest = cut_words(table, width)
    assert not cut and widest <= width, cut[:5]
    buf = io.StringIO()
    Console(file=buf, width=width).print(table)
    text = buf.getvalue()
    assert all(w in text.split() for h in RATE_HEADERS for w in h.split())  # no column dropped
    assert text.split().count("100") == 2  # audio < 1 s: 100% at both rates, never "10"


@pytest.mark.parametrize("width", [80, 200])
def test_vox_models_table_fits_and_shows_the_cached_demos_size(width, tmp_path, monkeypatch):
    from voxcli.models_cmd import list_models, models_table

    monkeypatch.setenv("VOX_CACHE", str(tmp_path))
    demo = tmp_path / "demo"
    demo.mkdir()
    (demo / "config.json").write_text("{}")
    (demo / "model.safetensors").write_bytes(b"\0" * 2_500_000)
    entries = list_models()
    assert {e.name: e.size_bytes for e in entries}["demo"] == 2_500_002
    table = models_table(entries)
    cut, widest = cut_words(table, width)
    # a description may fold a word longer than its column (a hub id); a name or a size never does
    figures = [w for col in table.columns[:3] for cell in (col.header, *col._cells)
               for w in str(cell).split()]
    assert not set(cut) & set(figures) and widest <= width, cut[:5]
    buf = io.StringIO()
    Console(file=buf, width=width).print(table)
    assert "2.5MB" in buf.getvalue().split()


def test_a_table_too_wide_for_the_terminal_is_dealt_into_parts_repeating_its_key():
    from voxcli.tables import figure_table

    headers = [f"column{i:02d}" for i in range(12)]
    table = figure_table("wide", ["key", *headers], [["k1", *(f"{1000 * i}.5" for i in range(12))]])
    buf = io.StringIO()
    Console(file=buf, width=80).print(table)
    lines = buf.getvalue().splitlines()
    assert max(map(len, lines)) <= 80 and "wide (continued)" in buf.getvalue()
    assert sum(line.split()[:1] == ["k1"] for line in lines) >= 2  # the row's key in every part
    assert not cut_words(table)[0]
