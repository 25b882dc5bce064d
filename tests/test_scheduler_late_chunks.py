"""The late-chunk path of policy full, on a hand-made timeline: a later chunk promoted to the urgent lane
near its deadline, a background batch below B launched by its deadline trigger, and the two config flags
(late_urgent, deadline_launch) that switch each off for ablations."""

from __future__ import annotations

import pytest

from tests.test_scheduler_admission import add, finish, lm, make
from voxcli.config import ChunkSchedule
from voxcli.engine.scheduler import Scheduler

FIRST_AUDIO = 0.05  # the first chunk is delivered here (below)


def _second_chunk_pending(**kw) -> tuple[Scheduler, object]:
    """One request of 200 frames in chunks of 2: prefill [0, 0.01], two decode steps (frames 1, 2), the
    first chunk through the urgent lane [0.03, 0.05], frames 3 and 4 by 0.07: chunk 1 (frames 2-3) is
    pending from then on with its playback deadline 0.05 + 2 x 0.08 = 0.21, alone (B = 8)."""
    cfg, prog, sched = make(policy="full", chunk=ChunkSchedule(first=2, steady=2), background_min_batch=8,
                            urgent_margin_s=0.1, **kw)
    add(sched, prog, 1, 0.0)
    finish(prog, sched, lm(sched.decide(0.0, ("lm",))), 0.0, 0.01)
    t = 0.01
    for _ in range(2):
        finish(prog, sched, lm(sched.decide(t, ("lm",))), t, t + 0.01)
        t += 0.01
    (urgent,) = sched.decide(t, ("urgent",))
    assert urgent.lane == "urgent" and [ch.index for ch in urgent.tag] == [0]
    finish(prog, sched, urgent, t, FIRST_AUDIO)
    t = FIRST_AUDIO
    for _ in range(2):
        finish(prog, sched, lm(sched.decide(t, ("lm",))), t, t + 0.01)
        t += 0.01
    (ch,) = sched.pending.values()
    assert ch.index == 1 and ch.deadline == pytest.approx(FIRST_AUDIO + 2 * sched.frame_s)
    return sched, ch


def test_a_later_chunk_near_its_deadline_is_promoted_to_the_urgent_lane():
    sched, ch = _second_chunk_pending(deadline_launch=False)  # the background lane would not take it
    before = ch.deadline - 0.1 - 1e-6
    assert sched.decide(before, ("urgent", "background")) == []
    assert sched.next_timer(before) == pytest.approx(ch.deadline - 0.1)  # the promotion
    (w,) = sched.decide(ch.deadline - 0.1 + 1e-6, ("urgent", "background"))
    assert w.lane == "urgent" and w.tag == [ch]
    assert sched.counts == {"promoted": 1, "deadline_launches": 0, "slack_cuts": 0}


def test_a_background_batch_below_b_launches_when_waiting_longer_would_be_late():
    sched, ch = _second_chunk_pending()
    trigger = ch.deadline - 0.1 - sched.est.codec("background", 1, ch.frames)
    assert sched.decide(trigger - 1e-6, ("background",)) == []  # 1 chunk < B = 8, and not yet late
    assert sched.next_timer(trigger - 1e-6) == pytest.approx(trigger)
    (w,) = sched.decide(trigger + 1e-6, ("background",))
    assert w.lane == "background" and w.tag == [ch]
    assert sched.counts == {"promoted": 0, "deadline_launches": 1, "slack_cuts": 0}


def test_with_both_off_a_late_chunk_waits_in_the_background_lane_for_b():
    sched, ch = _second_chunk_pending(late_urgent=False, deadline_launch=False)
    assert sched.decide(ch.deadline + 1.0, ("urgent", "background")) == []  # late, and still waiting
    assert sched.next_timer(ch.deadline - 0.5) is None
    assert sched.counts == {"promoted": 0, "deadline_launches": 0, "slack_cuts": 0}
