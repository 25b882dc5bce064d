"""The slack cap (config slack_cap, policy full) on hand-made timelines: all chunks of a background batch
end together, so a batch is cut to the head of the deadline order that still ends before its first chunk
turns urgent (plus one urgent decode of it); a chunk too close for any background batch is left to the
urgent lane; nothing is starved; a launch below B is priced at the bucket it runs in.

The cost profile is made by hand so each duration is plain arithmetic: a codec batch of n chunks takes
10 ms per chunk on the 32-SM background partition and 2 ms per chunk on the whole device (urgent lane)."""

from __future__ import annotations

import pytest
from voxcli.models.base import SynthesisRequest

from tests.test_scheduler_admission import finish, lm
from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.estimates import LatencyEstimator
from voxcli.engine.scheduler import Scheduler
from voxcli.sim.cost import CostProfile
from voxcli.sim.synthetic import SyntheticProgram

PROFILE = {
    "gpu": {"name": "hand-made", "sms": 132},
    "stages": {
        "decode": {"batch": [1, 256], "ms": [5.0, 5.0]},
        "prefill": {"batch": [1, 16], "ms": [5.0, 5.0]},
        "codec": {"batch": [1, 32], "ms": [2.0, 64.0], "sm_ms": {"32": [10.0, 320.0]}},
    },
}
MARGIN = 0.1
FIRST_AUDIO = (0.05, 0.07)  # the two urgent batches of first chunks end here (below)


def _sixteen_second_chunks(**kw) -> tuple[Scheduler, list]:
    """16 requests of 200 frames in chunks of 2, prefilled together [0, 0.01], two decode steps; their
    first chunks through the urgent lane in two batches of 8 ending at 0.05 and 0.07; two more decode
    steps by 0.09: every request's chunk 1 is pending, 8 with deadline 0.05 + 2 x 0.08 = 0.21 and 8 with
    0.23 (B = 8, so a background batch may launch at once)."""
    settings = dict(executor="sim", policy="full", admission="deadline",
                    chunk=ChunkSchedule(first=2, steady=2), background_min_batch=8, urgent_margin_s=MARGIN,
                    lm_sms=100, codec_sms=32, max_prefill_batch=16)
    cfg = EngineConfig(**(settings | kw))
    prog = SyntheticProgram()
    sched = Scheduler(cfg, prog.spec, LatencyEstimator(CostProfile.from_dict(PROFILE), cfg), prog.kv_tokens)
    for rid in range(16):
        r = sched.new_request(rid, prog.prepare(SynthesisRequest(text="hello there", fixed_frames=200)), 0.0)
        assert sched.add(r, 0.0) == []
    finish(prog, sched, lm(sched.decide(0.0, ("lm",))), 0.0, 0.01)
    t = 0.01
    for _ in range(2):
        finish(prog, sched, lm(sched.decide(t, ("lm",))), t, t + 0.01)
        t += 0.01
    for end in FIRST_AUDIO:
        (urgent,) = sched.decide(t, ("urgent",))
        assert urgent.lane == "urgent" and [ch.index for ch in urgent.tag] == [0] * 8
        finish(prog, sched, urgent, t, end)
        t = end
    for _ in range(2):
        finish(prog, sched, lm(sched.decide(t, ("lm",))), t, t + 0.01)
        t += 0.01
    chunks = sorted(sched.pending.values(), key=lambda ch: (ch.deadline, ch.request.id))
    assert [ch.index for ch in chunks] == [1] * 16
    assert [round(ch.deadline, 9) for ch in chunks] == [0.21] * 8 + [0.23] * 8
    return sched, chunks


def background_seconds(n: int) -> float:
    return 0.010 * n  # the hand-made profile on 32 SMs


def test_a_batch_that_would_end_past_its_first_deadline_is_cut_to_the_size_that_does_not():
    sched, chunks = _sixteen_second_chunks()
    now = 0.09  # the earliest deadline 0.21 is 120 ms away: no chunk is urgent yet
    assert sched.est.codec("background", 16, 32) == pytest.approx(background_seconds(16))
    assert now + background_seconds(16) > chunks[0].deadline  # all 16 at once: every chunk late
    (w,) = sched.decide(now, ("background",))
    # the first chunk turns urgent at 0.11 and the urgent lane would deliver it at 0.112: a batch of 2
    # ends at 0.11; 3 or 4 run in bucket 4, 40 ms, ending at 0.13
    assert w.lane == "background" and w.tag == chunks[:2] and w.bucket == 2
    assert now + sched.est.predict(w) <= chunks[0].deadline - MARGIN + 0.002 + 1e-9
    assert sched.counts == {"promoted": 0, "deadline_launches": 0, "slack_cuts": 1}
    # the rest of the early group turns urgent at 0.11 and goes to the urgent lane (whole device)
    (u,) = sched.decide(0.11 + 1e-9, ("urgent",))
    assert u.lane == "urgent" and u.tag == chunks[2:8]
    assert sched.counts["promoted"] == 6


def test_with_slack_cap_off_the_whole_ready_set_launches_as_the_paper_describes():
    sched, chunks = _sixteen_second_chunks(slack_cap=False)
    (w,) = sched.decide(0.09, ("background",))
    assert w.tag == chunks and w.bucket == 16
    assert sched.counts == {"promoted": 0, "deadline_launches": 0, "slack_cuts": 0}


def test_the_cut_grows_with_the_first_chunks_slack():
    sched, chunks = _sixteen_second_chunks()
    for ch in chunks[:8]:  # the early group's users hang up: the late group (deadline 0.23) is alone
        sched.cancel(ch.request.id, 0.09)
    # at 0.09 the late group's first chunk may end by 0.23 - 0.1 + 0.002 = 0.132: 4 chunks (40 ms) do,
    # 5 would run in bucket 8 (80 ms) and do not
    (w,) = sched.decide(0.09, ("background",))
    assert w.tag == chunks[8:12] and w.bucket == 4


def test_a_chunk_too_close_for_any_background_batch_is_left_to_the_urgent_lane():
    sched, chunks = _sixteen_second_chunks()
    # at 0.105 the early group is 105 ms from its deadline, not urgent yet, but even alone it would end
    # at 0.115, after the urgent lane (taking it at 0.11) would have delivered it at 0.112: the background
    # lane starts from the late group instead (first deadline 0.23: 0.105 + 20 ms <= 0.132, 3 would not)
    now = 0.105
    assert sched.codec.urgent_prefix(now) == 0
    (w,) = sched.decide(now, ("background",))
    assert w.tag == chunks[8:10]
    assert sched.next_timer(now) == pytest.approx(0.11)  # when the early group turns urgent: no spin
    (u,) = sched.decide(0.11 + 1e-9, ("urgent",))
    assert u.tag == chunks[:8] and sched.counts["promoted"] == 8


def test_with_late_urgent_off_a_batch_need_only_end_by_its_deadlines():
    sched, chunks = _sixteen_second_chunks(late_urgent=False)
    # no lane takes a chunk near its deadline, so the margin means nothing: at 0.09 the early group must
    # end by its deadline 0.21, which 8 chunks (80 ms) do and 9 (bucket 16, 160 ms) do not
    (w,) = sched.decide(0.09, ("background",))
    assert w.tag == chunks[:8] and w.bucket == 8 and sched.counts["slack_cuts"] == 1


def test_with_late_urgent_off_a_chunk_that_cannot_be_in_time_still_launches():
    sched, chunks = _sixteen_second_chunks(late_urgent=False)
    # at 0.225 every chunk is past saving (even alone the late group would end at 0.235 > 0.23): nothing
    # binds the cut, nothing is skipped, and all 16 go
    (w,) = sched.decide(0.225, ("background",))
    assert w.tag == chunks
    assert sched.counts["slack_cuts"] == 0


def test_with_late_urgent_off_a_lost_head_leads_and_the_chunks_that_can_be_in_time_bind_the_cut():
    sched, chunks = _sixteen_second_chunks(late_urgent=False)
    # at 0.205 the early group (deadline 0.21, alone it would end at 0.215) is lost and binds nothing;
    # the late group's first chunk could end by 0.23 alone, but not in a batch holding 9 or more chunks
    # (bucket 16, 160 ms): the lost 8 go first (deadline order), the rest wait
    (w,) = sched.decide(0.205, ("background",))
    assert w.tag == chunks[:8] and sched.counts["slack_cuts"] == 1


def test_a_deadline_launch_below_b_is_priced_at_its_bucket():
    sched, chunks = _sixteen_second_chunks(background_min_batch=16, urgent_margin_s=0.05)
    for ch in chunks[:8] + chunks[11:]:  # 3 chunks stay (< B = 16), deadline 0.23: bucket 4, 40 ms
        sched.cancel(ch.request.id, 0.09)
    trigger = 0.23 - 0.05 - background_seconds(4)  # 0.14 (priced at 3 chunks, 30 ms, it was 0.15: the
    # batch would have ended 10 ms after its first chunk turned urgent)
    assert sched.next_timer(0.09) == pytest.approx(trigger)
    assert sched.decide(trigger - 1e-6, ("background",)) == []
    (w,) = sched.decide(trigger, ("background",))
    assert w.tag == chunks[8:11] and w.bucket == 4
    assert sched.counts == {"promoted": 0, "deadline_launches": 1, "slack_cuts": 0}


def test_a_deadline_launch_is_cut_like_any_other_batch():
    # B = 32 (what adaptive batching raises B to under load): 16 ready chunks wait for B, but their
    # trigger (0.21 - 0.1 - 160 ms) has passed, so they launch by their deadline, and are cut to 2 as a
    # batch of 16 ready at B would be
    sched, chunks = _sixteen_second_chunks(background_min_batch=32)
    (w,) = sched.decide(0.09, ("background",))
    assert w.tag == chunks[:2]
    assert sched.counts == {"promoted": 0, "deadline_launches": 1, "slack_cuts": 1}


@pytest.mark.parametrize("late_urgent", [True, False])
def test_a_starved_codec_partition_keeps_every_invariant_with_the_cap(late_urgent):
    # 24 codec SMs at 90 req/s: background batches do get cut, and the observer (which prices batches
    # itself) checks that none ends after what it owes its chunks and that every small batch had a reason
    from support.engine_workload import check_outcomes, run_sim, workload

    cfg = EngineConfig(executor="sim", policy="full", admission="deadline", lm_sms=108, codec_sms=24,
                       late_urgent=late_urgent, kv_pages=65536, codec_slots=4096, max_running=4096,
                       max_queue=4096)
    reqs = workload(400, rate=90.0, seed=5)
    eng, obs, streams = run_sim(cfg, reqs)
    statuses = check_outcomes(eng, obs, streams, reqs)
    assert statuses["done"] > 350, statuses
    assert eng.scheduler.counts["slack_cuts"] > 0, eng.scheduler.counts
