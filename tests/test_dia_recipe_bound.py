"""Dia-1.6B's shipped recipe against its own capacity bound on the H100 sim profile (issue 17 part 1): the
chunk schedule, the decode bucket ladder and the split follow from the SLO's cap on the decode step
(voxcli/bound.py assumption 2b). Each check failed on the recipe before issue 17 (12/24/48 chunks, powers
of two, 96/32)."""

from __future__ import annotations

import bisect

import pytest
from voxcli.models.registry import sim_spec_for

from voxcli.bench.bounds import config_bound, schedule_sizes
from voxcli.bench.targets import model_config
from voxcli.bench.workloads import load_workload
from voxcli.bound import schedule_step_cap
from voxcli.engine.estimates import load_profile

OLD = ["decode_buckets=[2,4,8,16,32,64,128,256]", "lm_sms=96", "codec_sms=32", "chunk.ramp=[24]",
       "chunk.steady=48", "admission=deadline", "max_defer_s=0.1"]


def _bound(sets: list[str]):
    cfg = model_config("dia-1.6b", "sim", "h100", sets)
    spec = sim_spec_for(cfg.model)
    return cfg, spec, config_bound(cfg, load_workload("libritts"), spec.frame_rate)


def test_the_bound_is_capped_by_the_ttfa_not_the_256_row_bucket():
    cfg, spec, b = _bound([])
    # 15 delay steps + 12 frames = 27 steps within 200 ms less the prefill and the first codec call
    assert b.step_cap_s == pytest.approx(0.0073, abs=2e-4) and b.capped
    assert b.best_decode_batch < 128 and b.step_s <= b.step_cap_s


@pytest.mark.parametrize("sets, ok", [([], True), (OLD, False)])
def test_the_chunk_schedule_never_caps_the_step_below_the_ttfa(sets, ok):
    cfg, spec, b = _bound(sets)
    sizes = schedule_sizes(cfg.chunk_or(spec.chunk), 200)
    cap = schedule_step_cap(sizes, 1 / spec.frame_rate)
    # shipped 12, 12, 12, 24...: 8.7 ms; the old 12, 24, 48: half a frame, 5.8 ms < the TTFA's 7.3 ms
    assert (cap >= b.step_cap_s) is ok, (sizes[:4], cap, b.step_cap_s)


@pytest.mark.parametrize("sets, ok", [([], True), (OLD, False)])
def test_padding_to_a_bucket_costs_at_most_a_tenth_of_the_slo_step(sets, ok):
    cfg, spec, b = _bound(sets)
    profile = load_profile(cfg)
    buckets = sorted(cfg.decode_buckets)

    def step(rows: int) -> float:
        return profile.latency("decode", rows, cfg.lm_sms)

    waste = max(step(buckets[bisect.bisect_left(buckets, r)]) - step(r)
                for r in range(2, b.best_decode_batch + 1, 2))
    # old: 34 rows padded to 64 run a 6.9 ms step for a 4.4 ms batch
    assert (waste <= 0.1 * b.step_cap_s) is ok, waste


def test_the_split_gives_the_backbone_the_sms_the_codec_does_not_need():
    _, _, shipped = _bound([])
    _, _, old = _bound(["lm_sms=96", "codec_sms=32"])
    assert shipped.binding == old.binding == "backbone"
    assert shipped.rps > old.rps  # 112/16 bounds 7.3 req/s, 96/32 6.9
    # the 16 codec SMs still decode 3x the frames the backbone bound makes
    assert shipped.codec_rps >= 3 * shipped.lm_rps
