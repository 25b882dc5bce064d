"""The SLO's cap on the decode step in the capacity bound (voxcli/sim/bound.py assumption 2b), CFG work
sharing in it, and the chunk schedule's own step cap: every number worked out by hand on the hand-made
profile of tests/test_capacity_bound.py."""

from __future__ import annotations

import math

import pytest

from voxcli.sim.bound import capacity_bound, schedule_step_cap
from voxcli.sim.cost import CostProfile


def _hand(cfg_row: float = 1.0, prefill: bool = False) -> CostProfile:
    """10 SMs, half speed on 5; no prefill stage unless `prefill` (then the SLO's fixed point enters)."""
    half = {"sm": [5], "speed": [0.5]}
    stages = {
        "decode": {"batch": [1, 4], "ms": [10.0, 20.0], "cfg_row": cfg_row, **half},
        "codec": {"batch": [1, 2], "ms": [5.0, 8.0], "frames_ref": 10, **half},
    }
    if prefill:
        stages["prefill"] = {"batch": [1, 4], "ms": [2.0, 2.0], "per_token_ms": 0.1, **half}
    return CostProfile.from_dict({"gpu": {"name": "hand", "sms": 10}, "stages": stages})


SLO = dict(ttfa_s=0.2, lead_steps=2, first_frames=3, urgent_frames=3.0)
KW = dict(lm_sms=5, codec_sms=5, frames_per_request=100, prompt_tokens=10)


def test_the_ttfa_caps_the_step_and_the_bound_takes_the_best_batch_under_it():
    b = capacity_bound(_hand(), **KW, **SLO)
    # the first chunk (3 frames) on the whole device: 5 ms (the codec's smallest call); (200 - 5) ms over
    # 2 lead + 3 frame steps = 39 ms per step
    assert b.step_cap_s == pytest.approx(0.039)
    # decode on 5 SMs: 20 ms + (n - 1) x 20/3 ms: 3 rows 33.3 ms fit, 4 rows 40 ms do not
    assert b.best_decode_batch == 3 and b.step_s == pytest.approx(0.1 / 3)
    assert b.lm_frames_s == pytest.approx(90.0) and b.lm_rps == pytest.approx(90 / 102)
    # without the SLO: the table's best batch 4 (100 rows/s), as before
    old = capacity_bound(_hand(), **KW, lead_steps=2, urgent_frames=3.0)
    assert old.best_decode_batch == 4 and old.lm_rps == pytest.approx(100 / 102)
    assert math.isinf(old.step_cap_s)


def test_a_step_no_batch_can_meet_bounds_capacity_at_zero():
    b = capacity_bound(_hand(), **KW, **{**SLO, "ttfa_s": 0.05})
    # (50 - 5) ms / 5 steps = 9 ms < one row's 20 ms
    assert b.step_cap_s == pytest.approx(0.009) and b.lm_rps == 0.0 and b.rps == 0.0
    assert b.binding == "backbone"


def test_the_real_time_cap_binds_when_frames_play_faster_than_the_step():
    b = capacity_bound(_hand(), **KW, frame_s=0.03, **SLO)
    # the 97 frames after the first chunk within 100 x 30 ms of playback: 30.93 ms per step < 39
    assert b.step_cap_s == pytest.approx(3.0 / 97)
    # 2 rows (26.7 ms) fit, 3 rows (33.3 ms) no longer do: 75 frames/s
    assert b.best_decode_batch == 2 and b.lm_frames_s == pytest.approx(75.0)


def test_shared_cfg_rows_fit_more_pairs_under_the_cap():
    kw = dict(**KW, width=2, **SLO)
    # a pair costs 1.5 rows: 2 pairs = 3 rows, 33.3 ms <= 39: 60 request-frames/s (4 rows)
    shared = capacity_bound(_hand(0.5), cfg_shared=True, **kw)
    assert shared.best_decode_batch == 4 and shared.lm_frames_s == pytest.approx(60.0)
    # unshared: 2 pairs = 4 rows = 40 ms > 39; 1 pair = 2 rows, 26.7 ms: 37.5 request-frames/s
    plain = capacity_bound(_hand(0.5), cfg_shared=False, **kw)
    assert plain.best_decode_batch == 2 and plain.lm_frames_s == pytest.approx(37.5)


def test_under_an_slo_prefills_take_the_arrivals_of_one_step_and_stretch_the_first_chunk():
    b = capacity_bound(_hand(prefill=True), **KW, **SLO, prefill_batch=4)
    # the fixed point the bound must satisfy: at rate r with steps of s, a prefill call takes the
    # x = r s arrivals of a step, k = x / (1 - e^-x) given one; a call of k requests costs
    # P(k) = (2 + round(10 k) x 0.1) x 2 ms on 5 SMs (whole tokens); the LM lane spends r P(k) / k of
    # its time in them, so the first chunk's 5 steps must fit (200 - P(k) - 5 ms) x (1 - r P(k) / k)
    r, s = b.lm_rps, b.step_s
    x = r * s
    k = x / (1 - math.exp(-x))
    p_k = (2 + round(10 * k) * 0.1) * 2e-3
    assert b.prefill_s == pytest.approx(p_k / k, rel=1e-6)
    assert b.step_cap_s == pytest.approx((0.2 - p_k - 0.005) / 5 * (1 - r * p_k / k), rel=1e-6)
    assert r == pytest.approx(1 / (102 * s / (b.best_decode_batch) + p_k / k), rel=1e-6)
    # here: 3 rows (33.3 ms) still fit the stretched cap, and each request pays more than a quarter
    # of a 4-request call (the old, no-SLO share: 12 ms / 4 = 3 ms)
    assert b.best_decode_batch == 3 and b.prefill_s > 0.003
    assert capacity_bound(_hand(prefill=True), **KW, prefill_batch=4).prefill_s == pytest.approx(0.003)


def test_the_chunk_schedule_caps_the_step_where_it_grows_faster_than_playback():
    d = 0.0116
    # 12, 24, 48, 48: chunk 2 is made 24 steps after the first and due 12 frames of audio later (d / 2);
    # chunk 3: 72 steps for 36 frames (d / 2); chunk 4: 120 for 84 (0.7 d)
    assert schedule_step_cap([12, 24, 48, 48], d) == pytest.approx(d / 2)
    # 12, 12, 24, 24: 12 for 12 (d), 36 for 24 (2/3 d), 60 for 48 (0.8 d)
    assert schedule_step_cap([12, 12, 24, 24], d) == pytest.approx(d * 2 / 3)
    # equal chunks never stall a step at or below the frame's playback time
    assert schedule_step_cap([10, 10, 10], d) == pytest.approx(d)
    assert math.isinf(schedule_step_cap([10], d))


def test_poisson_occupancy_ceils_capacity_over_a_capped_bound():
    from voxcli.sim.bound import occupancy_ceiling

    # one request in the batch: P(N >= 1) = 1 - e^-x <= 0.1 -> x = -ln 0.9
    assert occupancy_ceiling(1, 0.90) == pytest.approx(-math.log(0.9))
    # three: P(N >= 3) = 1 - e^-m (1 + m + m^2 / 2) = 1 - q at m = 3x
    for q in (0.90, 0.99):
        m = 3 * occupancy_ceiling(3, q)
        assert 1 - math.exp(-m) * (1 + m + m * m / 2) == pytest.approx(1 - q, abs=1e-9)
    assert occupancy_ceiling(math.inf, 0.99) == 1.0
    # the SLO-capped bound of the first test holds 3 requests; its codec (12.5 req/s) does not bind
    b = capacity_bound(_hand(), **KW, **SLO)
    assert b.capped and b.best_requests == 3
    assert b.ceiling(0.90) == pytest.approx(occupancy_ceiling(3, 0.90))
    # no SLO: the table's best batch, no ceiling
    free = capacity_bound(_hand(), **KW)
    assert not free.capped and free.ceiling(0.99) == 1.0
