"""The capacity bound (voxcli/sim/bound.py) on a hand-made profile, every number worked out by hand, and the
CLI printing capacity / bound."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from voxcli.cli import app
from voxcli.sim.bound import capacity_bound
from voxcli.sim.cost import CostProfile


def _profile(codec_ms: tuple[float, float] = (5.0, 8.0)) -> CostProfile:
    # 10 SMs; every stage runs at half speed on 5 SMs (sm = [5], speed = [0.5])
    half = {"sm": [5], "speed": [0.5]}
    return CostProfile.from_dict({
        "gpu": {"name": "hand", "sms": 10},
        "stages": {
            "decode": {"batch": [1, 4], "ms": [10.0, 20.0], **half},
            "prefill": {"batch": [1, 4], "ms": [2.0, 2.0], "per_token_ms": 0.1, **half},
            "codec": {"batch": [1, 2], "ms": list(codec_ms), "frames_ref": 10, **half},
        }})


def test_backbone_bound_is_the_best_bucket_less_the_prefill_share():
    b = capacity_bound(_profile(), lm_sms=5, codec_sms=5, frames_per_request=100, prompt_tokens=10)
    # decode on 5 SMs: batch 1 = 20 ms (50 rows/s), batch 4 = 40 ms (100 rows/s): the best bucket is 4
    assert b.best_decode_batch == 4 and b.lm_frames_s == pytest.approx(100.0)
    # prefill of 4 requests x 10 tokens on 5 SMs: (2 + 40 x 0.1) x 2 = 12 ms, 3 ms per request
    assert b.prefill_s == pytest.approx(0.003)
    # 100 frames / 100 frames/s + 3 ms = 1.003 s of backbone per request
    assert b.lm_rps == pytest.approx(1 / 1.003)
    # codec on 5 SMs: 1 chunk = 10 ms (1000 frames/s), 2 chunks = 16 ms (1250 frames/s): 100 / 1250 = 0.08 s
    assert b.best_codec_batch == 2 and b.codec_frames_s == pytest.approx(1250.0)
    assert b.codec_rps == pytest.approx(12.5)
    assert b.rps == pytest.approx(1 / 1.003) and b.binding == "backbone"
    assert b.fraction(0.5) == pytest.approx(0.5 * 1.003)


def test_cfg_pairs_delay_patterns_and_a_capped_bucket_cost_the_backbone_more():
    b = capacity_bound(_profile(), lm_sms=5, codec_sms=5, frames_per_request=100, prompt_tokens=10,
                       width=2, lead_steps=10, max_decode_batch=1)
    # bucket 1 only: 50 rows/s; (100 + 10) steps x 2 rows = 4.4 s; prefill_batch counts rows: 4 rows
    # = 2 pairs of 2 x 10 tokens per call, (2 + 40 x 0.1) x 2 = 12 ms, 6 ms per pair
    assert b.best_decode_batch == 1 and b.lm_frames_s == pytest.approx(25.0)
    assert b.prefill_s == pytest.approx(0.006) and b.lm_rps == pytest.approx(1 / 4.406)


def test_a_slow_codec_binds():
    b = capacity_bound(_profile((500.0, 800.0)), lm_sms=5, codec_sms=5, frames_per_request=100,
                       prompt_tokens=10)
    # 2 chunks of 10 frames in 1.6 s on 5 SMs: 12.5 frames/s, 8 s per request
    assert b.codec_rps == pytest.approx(0.125) and b.rps == pytest.approx(0.125) and b.binding == "codec"
    # the urgent lane decodes the first 20 frames elsewhere: 80 frames / 12.5 frames/s = 6.4 s
    b = capacity_bound(_profile((500.0, 800.0)), lm_sms=5, codec_sms=5, frames_per_request=100,
                       prompt_tokens=10, urgent_frames=20)
    assert b.codec_rps == pytest.approx(1 / 6.4)


def test_lanes_without_partitions_time_share_the_whole_device():
    b = capacity_bound(_profile(), lm_sms=None, codec_sms=None, frames_per_request=100, prompt_tokens=10,
                       partitioned=False)
    # whole device: 4 rows in 20 ms = 200 rows/s -> 0.5 s; prefill (2 + 4) / 4 = 1.5 ms;
    # codec 20 frames in 8 ms = 2500 frames/s -> 0.04 s; time-shared: 1 / 0.5415
    assert b.rps == pytest.approx(1 / 0.5415) and b.binding == "time-shared"


def test_vox_bench_prints_capacity_over_bound_and_vox_profile_both_bounds(tmp_path):
    runner = CliRunner()
    res = runner.invoke(app, ["bench", "--executor", "sim", "--gpu", "h100", "--model", "qwen3-tts-1.7b",
                              "--rates", "2,4", "--duration", "2", "--seeds", "1", "--warmup", "0",
                              "--workload", "seed-tts", "--out", str(tmp_path), "--no-plot"])
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "bench-qwen3-tts-1.7b-sim-h100.json").read_text())
    bound = data["meta"]["bounds"]["full"]
    assert bound["binding"] in ("backbone", "codec") and bound["rps"] > 4
    cap = data["variants"][0]["capacity90"]
    row = [line for line in res.output.splitlines()
           if line.split()[:1] == ["full"] and "req/s:" not in line][-1]  # the bound table's row
    assert "capacity / bound" in res.output and f"≥{cap / bound['rps']:.2f}" in row
    res = runner.invoke(app, ["profile", "--gpu", "h100", "--model", "qwen3-tts-1.7b", "--target-rate", "40",
                              "--no-simulate", "--out", str(tmp_path / "p")])
    assert res.exit_code == 0, res.output
    assert "capacity bound per split" in res.output and "LM bound" in res.output
    assert "codec bound" in res.output


def test_the_bound_and_late_chunk_tables_fit_80_columns():
    from dataclasses import asdict

    from tests.test_tables_80 import _rr, cut_words
    from voxcli.bench.report import bound_table, capacity_table, late_chunk_tables
    from voxcli.bench.sweep import SweepResult, SweepSpec, Variant, VariantSweep
    from voxcli.bench.targets import model_config
    from voxcli.bench.workloads import load_workload
    from voxcli.config import recipe_path
    from voxcli.sim.config_bound import SplitBounds, split_bounds_table
    from voxcli.sim.splits import LoadShape, split_points

    results = [_rr(20, 1.0), _rr(40, 0.97), _rr(100, 0.5)]
    results[1].promoted, results[1].deadline_launches = 12345, 678
    sw = VariantSweep(Variant.policy("full"), results=results, wall_s=1234.5)
    sw.per_seed = [results, results[:2]]
    bound = capacity_bound(_profile(), lm_sms=5, codec_sms=5, frames_per_request=100, prompt_tokens=10)
    result = SweepResult(SweepSpec(rates=[20, 40, 100]), [sw], {"bounds": {"full": asdict(bound)}})
    late = late_chunk_tables(result)
    assert len(late) == 1
    prof = CostProfile.from_toml(recipe_path("gpus/h100"))
    points = split_points(prof, 40.0, LoadShape(frames_per_request=98.0, chunks_per_request=10.0))
    bounds = SplitBounds(model_config("qwen3-tts-1.7b", "sim", "h100"), load_workload("libritts")[:50], 12.5)
    table = split_bounds_table(bounds, points)
    for t in [capacity_table(result), bound_table(result), *late, table]:
        cut, widest = cut_words(t)
        assert not cut and widest <= 80, (t.title, cut[:5])
