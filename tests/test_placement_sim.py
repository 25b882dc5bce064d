"""The placement co-simulation (voxcli/sim/placement.py): a placement's engines on one virtual clock
behind the front door's routing, what `vox profile --gpus N` predicts SLO capacities with. Virtual time
throughout: nothing here depends on the machine's speed or load."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner
from voxcli.models.registry import sim_spec_for

from voxcli.bench.client import schedule
from voxcli.bench.sweep import Variant
from voxcli.bench.targets import model_config, sim_target
from voxcli.bench.workloads import load_workload
from voxcli.cli import app
from voxcli.engine.hold import CHUNK_HOLD_S
from voxcli.engine.roles import CodecEngine, LMEngine, VirtualEpoch
from voxcli.placement import Placement
from voxcli.sim.placement import OPTIMISTIC, PESSIMISTIC, Network, PlacementSimTarget, sim_engines

MODEL = "qwen3-tts-1.7b"


@pytest.fixture(scope="module")
def config():
    return model_config(MODEL, "sim", "h100", ["max_running=4"])


@pytest.fixture(scope="module")
def arrivals():
    return schedule(1.5, 16, 7, load_workload("libritts"), frame_rate=sim_spec_for(MODEL).frame_rate)


def _play(config, placement, network, arrivals):
    target = PlacementSimTarget(sim_engines(config), placement, network)
    try:
        records = target.play(arrivals, 120)
        engines = {role: [r.engine for r in reps] for role, reps in (target.replicas or {}).items()}
        served = {role: [r.served for r in reps] for role, reps in (target.replicas or {}).items()}
        freed = all(e.scheduler.kv.used == 0 for e in engines["both"] + engines["lm"]) and all(
            e.scheduler.slots.used == 0 for es in engines.values() for e in es)
        return records, served, freed, engines
    finally:
        target.close()


def test_role_engines_run_on_the_virtual_clock(config):
    lm = sim_engines(config)("lm")
    codec = sim_engines(config)("codec")
    try:
        assert isinstance(lm, LMEngine) and isinstance(codec, CodecEngine) and not lm.realtime
        assert isinstance(lm.clock, VirtualEpoch)
        assert lm.clock.to_epoch(1.25) == 1.25 == lm.clock.from_epoch(1.25)
    finally:
        lm.close()
        codec.close()


def test_one_both_replica_with_instant_hops_is_the_bench_sim(config, arrivals):
    """Stepped in report periods, one engine serves what `vox bench --executor sim` serves: an extra
    scheduling decision at each period boundary moves a delivery by microseconds, never a status."""
    ref = sim_target(config, Variant("ref")).play(arrivals, 120)
    got, served, freed, _ = _play(config, Placement(both=1), Network("instant", hop_s=0.0), arrivals)
    assert len(got) == len(ref) == len(arrivals) and served["both"] == [len(arrivals)] and freed
    for a, b in zip(ref, got, strict=True):
        assert a.status == b.status and a.sent == b.sent and len(a.deliveries) == len(b.deliveries)
        moved = [abs(x[0] - y[0]) for x, y in zip(a.deliveries, b.deliveries, strict=True)]
        assert max(moved, default=0.0) < 1e-4
    # a hop of h: the request reaches the replica h later and its audio the client h later again
    hopped, _, _, _ = _play(config, Placement(both=1), Network("h", hop_s=0.01), arrivals)
    assert all(b.status == "done" for b in hopped)
    assert min(b.ttfa for b in hopped) >= 0.02
    shift = sorted(b.ttfa - a.ttfa for a, b in zip(ref, hopped, strict=True))
    assert shift[len(shift) // 2] == pytest.approx(0.02, abs=0.005)


def test_split_placement_serves_whole_requests_and_frees_both_sides(config, arrivals):
    both, _, _, _ = _play(config, Placement(both=1), OPTIMISTIC, arrivals)
    split, served, freed, _ = _play(config, Placement(lm=1, codec=1), OPTIMISTIC, arrivals)
    assert freed and served == {"both": [], "lm": [len(arrivals)], "codec": [len(arrivals)]}
    assert all(r.status == "done" for r in split)
    # the same requests, the same audio: every request's audio seconds as on one engine
    assert [round(r.audio_seconds, 6) for r in split] == [round(r.audio_seconds, 6) for r in both]
    again, _, _, _ = _play(config, Placement(lm=1, codec=1), OPTIMISTIC, arrivals)
    assert [(r.status, r.deliveries) for r in again] == [(r.status, r.deliveries) for r in split]


def test_a_split_request_pays_its_hops_and_chunk_holds(config, arrivals):
    """Pessimistic hops: front door -> codec -> LM, chunk 0 -> codec, audio -> front door, at least four
    hops before the first audio; a later chunk may wait up to the hold, within its deadline's lead."""
    slow, _, _, _ = _play(config, Placement(lm=1, codec=1), PESSIMISTIC, arrivals)
    fast, _, _, _ = _play(config, Placement(lm=1, codec=1), OPTIMISTIC, arrivals)
    assert min(r.ttfa for r in slow) >= 4 * PESSIMISTIC.hop_s > min(r.ttfa for r in fast)
    assert all(r.status == "done" for r in slow)
    held = Network("held", hop_s=0.0, chunk_hold_s=CHUNK_HOLD_S)
    free = Network("free", hop_s=0.0, chunk_hold_s=0.0)
    a, _, _, _ = _play(config, Placement(lm=1, codec=1), held, arrivals)
    b, _, _, _ = _play(config, Placement(lm=1, codec=1), free, arrivals)
    # holding chunks moves later chunks' codec work, barely the first audio (chunk 0 never waits: only
    # the codec batches it shares change)
    assert all(abs(x.ttfa - y.ttfa) < 0.005 for x, y in zip(a, b, strict=True))
    assert [r.deliveries for r in a] != [r.deliveries for r in b]


def test_the_front_door_spreads_requests_by_slack(config, arrivals):
    records, served, freed, _ = _play(config, Placement(both=2), OPTIMISTIC, arrivals)
    assert freed and sum(served["both"]) == len(arrivals) and min(served["both"]) >= len(arrivals) // 3
    records, served, freed, _ = _play(config, Placement(both=1, lm=1, codec=1), OPTIMISTIC, arrivals)
    assert freed and served["both"][0] > 0 and served["lm"][0] > 0 and served["codec"] == served["lm"]
    assert all(r.status == "done" for r in records)


def test_vox_profile_predicts_placement_capacities_by_simulation(tmp_path):
    res = CliRunner().invoke(app, ["profile", "--gpu", "h100", "--model", MODEL, "--gpus", "2", "--set",
                                   "max_running=4", "--keep", "1", "--sim-rates", "4,8", "--sim-duration",
                                   "3", "--sim-seeds", "1", "--placements", "2", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "SLO capacity" in res.output and "best placement by SLO capacity:" in res.output
    summary = json.loads((tmp_path / f"{MODEL}-h100.json").read_text())
    sims = summary["placements_simulated"]
    assert [s["placement"] for s in sims] and {s["placement"] for s in sims} == {"both=2", "lm=1,codec=1"}
    for s in sims:
        assert 0 < s["capacity90_pessimistic"] <= s["capacity90_optimistic"] * 1.2
        for pred in s["simulated"].values():
            # a coarse pass in tenths of the bound, then quarters of the tenth where 90% was crossed
            rates, bound = pred["rates"], s["bound_rps"]
            gaps = {round((b - a) / bound, 3) for a, b in zip(rates, rates[1:], strict=False)}
            assert 0.025 in gaps and max(gaps) <= 0.1 + 1e-3 and pred["capacity90"] < rates[-1]
            passed = [r for r, a in zip(rates, pred["attainment"], strict=True) if r <= pred["capacity90"]]
            assert all(a >= 0.9 for r, a in zip(rates, pred["attainment"], strict=True) if r in passed)
    assert sims[0]["capacity90_optimistic"] >= sims[1]["capacity90_optimistic"]  # sorted by it
    assert "max_running = 4" in (tmp_path / f"{MODEL}-h100.toml").read_text()


def test_vox_profile_refuses_a_negative_placement_count(tmp_path):
    res = CliRunner().invoke(app, ["profile", "--gpu", "h100", "--gpus", "2", "--placements", "-1",
                                   "--out", str(tmp_path)])
    assert res.exit_code == 2 and "--placements must be >= 0" in res.output
