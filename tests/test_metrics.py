"""The metric definitions, pinned on hand-made timelines (no engine involved)."""

from __future__ import annotations

import pytest

from voxcli.bench.metrics import (
    RequestRecord,
    capacity,
    meets_slo,
    percentile,
    player_pause,
    rate_result,
    should_stop,
    stalled,
)


def _record(ttfa: float, gaps: list[float], chunk_s: float = 0.8, status: str = "done") -> RequestRecord:
    """A request sent at t=0: first audio at `ttfa`, then each next chunk `gap` after the previous one."""
    t, deliveries = ttfa, [(ttfa, chunk_s)]
    for g in gaps:
        t += g
        deliveries.append((t, chunk_s))
    return RequestRecord(sent=0.0, status=status, deliveries=deliveries, finished=t)


def test_player_never_pauses_when_audio_arrives_before_it_runs_out():
    assert player_pause(_record(0.1, [0.8, 0.5, 0.8]).deliveries) == 0.0


def test_stall_of_9ms_passes_and_10ms_fails():
    nine = _record(0.1, [0.809])  # the second chunk comes 9 ms after the first chunk's audio ran out
    ten = _record(0.1, [0.810])
    assert player_pause(nine.deliveries) == pytest.approx(0.009)
    assert not stalled(nine) and meets_slo(nine)
    assert stalled(ten) and not meets_slo(ten)


def test_pauses_add_up_across_chunks_and_buffer_does_not_refill_the_past():
    # Two 5 ms pauses add up to a stall; a later early chunk does not undo them.
    rec = _record(0.1, [0.805, 0.805, 0.1])
    assert player_pause(rec.deliveries) == pytest.approx(0.010)
    assert stalled(rec)


def test_a_paused_player_resumes_from_the_late_chunk():
    # 0.3 s late, then the next chunk exactly when the late chunk's audio ends: one pause only.
    rec = _record(0.0, [1.1, 0.8])
    assert player_pause(rec.deliveries) == pytest.approx(0.3)


def test_ttfa_target_is_inclusive():
    assert meets_slo(_record(0.200, [0.8]))
    assert not meets_slo(_record(0.201, [0.8]))


def test_rejected_failed_and_audio_less_requests_are_misses():
    good = _record(0.05, [0.8])
    rejected = RequestRecord(sent=0.0, status="rejected", reason="queue full")
    failed = _record(0.05, [0.8], status="failed")
    no_audio = RequestRecord(sent=0.0, status="done")
    assert meets_slo(good)
    assert not any(meets_slo(r) for r in (rejected, failed, no_audio))
    res = rate_result(4.0, [good, rejected, failed, no_audio], window_s=1.0)
    assert res.attainment == pytest.approx(0.25)
    assert res.rejected == 1 and res.failed == 1 and res.met == 1 and res.goodput == 1.0


def _rr(rate: float, attainment: float):
    n = 100
    met = round(attainment * n)
    recs = [_record(0.05, [0.8]) for _ in range(met)] + [_record(0.5, [0.8]) for _ in range(n - met)]
    return rate_result(rate, recs, window_s=10.0)


def test_capacity_stops_at_the_first_rate_that_fails():
    results = [_rr(2, 1.0), _rr(4, 0.95), _rr(6, 0.85), _rr(8, 0.99), _rr(10, 0.5)]
    assert capacity(results, 0.90) == 4  # 8 req/s passes again, but 6 failed first
    assert capacity(results, 0.99) == 2
    assert capacity(results[::-1], 0.90) == 4  # order of the list does not matter
    assert capacity([_rr(2, 0.5)], 0.9) == 0


def test_completed_rate_is_per_second_of_arrivals():
    recs = [RequestRecord(sent=float(i), deliveries=[(i + 0.1, 0.8)], finished=i + 1.0) for i in range(10)]
    res = rate_result(1.0, recs, window_s=10.0)
    assert res.completed_rps == pytest.approx(10 / 10.0)
    assert res.ttfa_p50 == pytest.approx(0.1)
    half = [*recs[:5], *(RequestRecord(sent=float(i), status="failed") for i in range(5, 10))]
    assert rate_result(1.0, half, window_s=10.0).completed_rps == pytest.approx(0.5)


def test_done_per_second_pooled_over_seeds_is_per_seed_not_three_times_one_span():
    """Each seed replays its own 10 s window on its own clock: pooled, 3 x 10 completions over 3 x 10 s
    of arrivals is 1 done/s at 1 req/s offered (the old span-based figure said 3)."""
    one_seed = [RequestRecord(sent=float(i), deliveries=[(i + 0.1, 0.8)], finished=i + 1.0)
                for i in range(10)]
    pooled = rate_result(1.0, one_seed * 3, window_s=10.0 * 3)
    assert pooled.completed_rps == pytest.approx(1.0)
    assert pooled.goodput <= pooled.completed_rps <= 1.0 + 1e-9


def test_stop_rule_fires_below_half_with_audio_within_one_second():
    fast = [_record(0.5, [0.8]) for _ in range(5)]
    slow = [_record(1.5, [0.8]) for _ in range(6)]
    assert should_stop(rate_result(2, fast + slow, 1.0))
    assert not should_stop(rate_result(2, fast + slow[:5], 1.0))


def test_percentile_interpolates():
    assert percentile([1, 2, 3, 4, 5], 50) == 3
    assert percentile([0, 10], 90) == pytest.approx(9)
    assert percentile([], 50) is None
