"""The bench harness end to end on the sim executor (virtual time, small and fast)."""

from __future__ import annotations

import json

from voxcli.models.qwen3_tts.sim import build_profile
from voxcli.models.sim_priors import GPUS, codec_ms, decode_speed

from voxcli.bench.client import schedule
from voxcli.bench.report import write_json
from voxcli.bench.sweep import SweepSpec, Variant, parse_rates, sweep_variant
from voxcli.bench.targets import sim_target
from voxcli.bench.workloads import load_workload
from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.sim.cost import CostProfile


def test_calibrated_profile_reproduces_the_micro_facts_it_was_built_from():
    prof = CostProfile.from_dict(build_profile("h100", 6.0))
    assert prof.latency("codec", 1, None) * 1e3 == __import__("pytest").approx(1.9, abs=1e-3)
    assert prof.latency("codec", 16, None) * 1e3 == __import__("pytest").approx(10.0, abs=1e-3)
    assert prof.latency("codec", 1, 24) * 1e3 == __import__("pytest").approx(5.0, abs=1e-3)
    assert prof.latency("codec", 16, 24) * 1e3 == __import__("pytest").approx(49.0, abs=1e-3)
    assert abs(codec_ms(16, 24) - 49.0) < 1e-6
    assert abs(decode_speed(1, 108, 132) - 0.99) < 1e-9 and abs(decode_speed(256, 108, 132) - 0.93) < 1e-9
    assert GPUS["b200"].sms == 148


def test_parse_rates():
    assert parse_rates("2:10:2") == [2, 4, 6, 8, 10]
    assert parse_rates("0.5:1.5:0.5") == [0.5, 1.0, 1.5]
    assert parse_rates("4,2") == [2, 4]
    for bad in ("0:4:1", "4:2:1", "a:b:c", "2:4:0"):
        try:
            parse_rates(bad)
        except ValueError as e:
            assert "rates" in str(e)
        else:
            raise AssertionError(bad)


def test_sim_sweep_finds_a_capacity_and_stops(tmp_path):
    prof = CostProfile.from_dict(build_profile("h100", 6.0))
    cfg = EngineConfig(executor="sim", gpu="h100", policy="sync", chunk=ChunkSchedule(first=10, steady=10))
    utts = load_workload("seed-tts")
    spec = SweepSpec(rates=[5.0, 200.0, 400.0], duration_s=3.0, warmup=8, seeds=1)
    sw = sweep_variant(
        sim_target(cfg, Variant.policy("sync"), profile=prof), Variant.policy("sync"), spec, utts
    )
    r5 = sw.results[0]
    assert r5.sent == len(schedule(5.0, 3.0, 0, utts)) and r5.attainment == 1.0 and r5.ttfa_p50 < 0.2
    assert sw.results[1].attainment < 0.5  # 200 req/s is far beyond one simulated H100
    assert sw.stopped_after == 200.0 and len(sw.results) == 2  # the stop rule ended the sweep
    assert sw.capacity90 == 5.0
    from voxcli.bench.sweep import SweepResult

    out = write_json(SweepResult(spec, [sw]), tmp_path / "r.json")
    data = json.loads(out.read_text())
    assert data["variants"][0]["capacity90"] == 5.0


def test_capacity_is_reported_per_seed_as_mean_and_spread():
    from voxcli.bench.metrics import RateResult
    from voxcli.bench.report import capacity_cell
    from voxcli.bench.sweep import VariantSweep

    def rr(rate, att):
        return RateResult(rate, 10, round(10 * att), 10, 0, 0, att, 0.0, 0.0, None, None, None, 1.0, 0, 1.0)

    sw = VariantSweep(Variant.policy("full"))
    sw.per_seed = [[rr(40, 1.0), rr(44, 0.95), rr(48, 0.5)], [rr(40, 1.0), rr(44, 0.8), rr(48, 0.95)],
                   [rr(40, 1.0), rr(44, 1.0), rr(48, 0.92)]]
    assert sw.seed_capacities(0.9) == [44, 40, 48]  # the second seed fails at 44: its capacity is 40
    st = sw.capacity_stats(0.9)
    assert st["mean"] == 44 and st["min"] == 40 and st["max"] == 48
    assert abs(st["std"] - (32 / 3) ** 0.5) < 1e-9
    assert capacity_cell(sw, 0.9) == "≥44.0 ± 3.3 (40–≥48, 3 seeds)"  # the third seed passed 48, the top
    sw.per_seed[2].append(rr(52, 0.5))  # a higher rate where it fails: 48 is now a measurement
    sw.per_seed[0].append(rr(52, 0.5))
    sw.per_seed[1].append(rr(52, 0.5))
    assert capacity_cell(sw, 0.9) == "44.0 ± 3.3 (40–48, 3 seeds)"


def test_a_capacity_at_the_top_of_the_tested_range_reads_at_least():
    from voxcli.bench.metrics import RateResult
    from voxcli.bench.report import capacity_cell
    from voxcli.bench.sweep import VariantSweep

    def rr(rate, att):
        return RateResult(rate, 10, round(10 * att), 10, 0, 0, att, 0.0, 0.0, None, None, None, 1.0, 0, 1.0)

    sw = VariantSweep(Variant.policy("full"))
    sw.per_seed = [[rr(20, 1.0), rr(40, 1.0)] for _ in range(3)]
    sw.results = [rr(20, 1.0), rr(40, 1.0)]
    assert capacity_cell(sw, 0.9) == "≥40 (3 seeds)"  # not "40.0 ± 0.0"
    assert sw.capacity_stats(0.9)["at_top"] == 3
    one = VariantSweep(Variant.policy("full"), results=[rr(20, 1.0), rr(40, 1.0)])
    assert capacity_cell(one, 0.9) == "≥40"
    one.results.append(rr(60, 0.2))
    assert capacity_cell(one, 0.9) == "40"
