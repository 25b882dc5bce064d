"""`vox profile` split selection and placement ranking on hand-made profiles."""

from __future__ import annotations

import pytest

from voxcli.sim.cost import CostProfile
from voxcli.sim.splits import (
    LoadShape,
    Placement,
    choose_split,
    max_sustainable_rate,
    rank_placements,
    split_points,
)

SHAPE = LoadShape(frames_per_request=100, chunks_per_request=11)  # 10 background chunks per request


def _profile(codec_chunk_ms_at_8sms: float = 8.0) -> CostProfile:
    """A 64-SM device: the backbone is flat (latency-bound) down to 32 SMs; the codec's work scales
    with SMs (one chunk costs `codec_chunk_ms_at_8sms` ms on 8 SMs, 8x less on 64)."""
    whole = codec_chunk_ms_at_8sms / 8
    return CostProfile.from_dict({
        "gpu": {"name": "hand", "sms": 64},
        "stages": {
            "decode": {"batch": [1, 256], "ms": [10.0, 10.0], "sm": [8, 32, 64], "speed": [0.25, 1.0, 1.0]},
            "codec": {"batch": [1, 32], "ms": [whole, 32 * whole], "frames_ref": 10,
                      "sm_ms": {"8": [codec_chunk_ms_at_8sms, 32 * codec_chunk_ms_at_8sms]}},
        }})


def test_the_backbone_gets_the_most_sms_while_the_codec_keeps_up():
    prof = _profile()  # on 8k SMs the codec does k*125 chunks/s = k*12.5 req/s of background chunks
    points = split_points(prof, rate=30.0, shape=SHAPE)
    assert [p.codec_sms for p in points] == [8, 16, 24, 32, 40, 48, 56]
    chosen = choose_split(points)
    # 24 SMs (37.5 req/s of chunks) is the smallest codec partition that keeps up with 30 req/s
    assert (chosen.lm_sms, chosen.codec_sms) == (40, 24)
    assert chosen.keeps_up and not [p for p in points if p.codec_sms < 24 and p.keeps_up]


def test_a_higher_target_moves_sms_to_the_codec_and_splits_are_multiples_of_8():
    prof = _profile()
    assert choose_split(split_points(prof, 40.0, SHAPE)).codec_sms == 32
    assert all(p.codec_sms % 8 == 0 and p.lm_sms + p.codec_sms == 64 for p in split_points(prof, 40.0, SHAPE))


def test_when_no_split_keeps_up_the_most_sustainable_one_wins():
    prof = _profile()
    points = split_points(prof, 1000.0, SHAPE)
    assert not any(p.keeps_up for p in points)
    best = choose_split(points)
    assert best.sustainable_rps == max(p.sustainable_rps for p in points)
    assert max_sustainable_rate(prof, SHAPE) == pytest.approx(best.sustainable_rps)


def test_placements_use_min_of_shared_codec_and_sum_of_backbones():
    roles = {"both": 40.0, "lm_only": 60.0, "codec_only": 100.0}
    ranked = rank_placements(roles, 3)
    by = {(p.both, p.lm_only, p.codec_only): p.rps for p in ranked}
    assert by[(3, 0, 0)] == 120.0
    assert by[(0, 2, 1)] == 100.0  # two backbones (120) share one codec (100)
    assert by[(1, 1, 1)] == 40.0 + 60.0
    assert by[(0, 3, 0)] == 0.0  # backbones without a codec produce no audio
    assert ranked[0] == Placement(3, 0, 0, 120.0)
    with pytest.raises(ValueError):
        rank_placements(roles, 0)


def test_batch_dependent_sm_tables_in_the_cost_profile():
    prof = _profile(80.0)
    # tabled: 8 SMs; whole device: 64 SMs; in between speed is interpolated linearly in SMs
    assert prof.latency("codec", 1, 8) == pytest.approx(0.080)
    assert prof.latency("codec", 1, None) == pytest.approx(0.010)
    assert prof.latency("codec", 1, 36) == pytest.approx(1 / ((1 / 80 + 1 / 10) / 2) / 1000)
    assert prof.latency("codec", 1, 4) == pytest.approx(0.160)  # below the table: proportional
    assert prof.latency("decode", 8, 16) == pytest.approx(0.010 / 0.5)  # plain sm/speed curves still work
    again = CostProfile.from_dict(prof.to_dict())
    assert again.latency("codec", 16, 24) == pytest.approx(prof.latency("codec", 16, 24))
