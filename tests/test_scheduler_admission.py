"""The pure scheduler, driven by hand with explicit times: deadline-aware admission and its cap,
prefill-first, least-slack decode order, timers."""

from __future__ import annotations

from voxcli.models.base import SynthesisRequest

from voxcli.config import EngineConfig
from voxcli.engine.estimates import LatencyEstimator, default_profile
from voxcli.engine.executors.base import Completion, Work
from voxcli.engine.executors.stages import run_work
from voxcli.engine.scheduler import Scheduler
from voxcli.sim.synthetic import SyntheticProgram


def make(**kw):
    kw.setdefault("admission", "deadline")  # these tests pin the LM lane's rules; the TTFA gate has its own
    cfg = EngineConfig(executor="sim", **kw)
    prog = SyntheticProgram()
    sched = Scheduler(cfg, prog.spec, LatencyEstimator(default_profile(), cfg), prog.kv_tokens)
    return cfg, prog, sched


def add(sched, prog, rid, t, frames=200):
    r = sched.new_request(rid, prog.prepare(SynthesisRequest(text="hello there", fixed_frames=frames)), t)
    assert sched.add(r, t) == []
    return r


def finish(prog, sched, work: Work, t0: float, t1: float):
    return sched.complete(Completion(work, t0, t1, run_work(prog, work)))


def lm(works):
    return next(w for w in works if w.lane == "lm")


def test_deadline_admission_defers_at_most_max_defer():
    # a tight TTFA target: the running request's first chunk has less slack than a prefill takes
    cfg, prog, sched = make(ttfa_target_s=0.01, admission="deadline", max_defer_s=0.1)
    add(sched, prog, 1, 0.0)
    w = lm(sched.decide(0.0))
    assert w.stage == "prefill"
    finish(prog, sched, w, 0.0, 0.01)
    add(sched, prog, 2, 0.01)
    stages = []
    for k in range(10):
        t = 0.01 + 0.03 * k
        w = lm(sched.decide(t, ("lm",)))
        stages.append((round(t, 3), w.stage))
        if w.stage == "prefill":
            break
        assert sched.next_timer(t) is not None and abs(sched.next_timer(t) - 0.11) < 1e-9  # the cap
        finish(prog, sched, w, t, t + 0.03)
    # deferred while t - 0.01 < 0.1, admitted at the first LM decision at/after the cap
    assert [s for _, s in stages[:-1]] == ["decode"] * 4 and stages[-1] == (0.13, "prefill")
    assert sched.defer_since is None


def test_no_deferral_when_slack_is_ample():
    cfg, prog, sched = make(ttfa_target_s=5.0, admission="deadline")
    add(sched, prog, 1, 0.0)
    finish(prog, sched, lm(sched.decide(0.0)), 0.0, 0.01)
    add(sched, prog, 2, 0.01)
    assert lm(sched.decide(0.01)).stage == "prefill"


def test_prefill_first_admits_at_once_and_decodes_in_arrival_order():
    cfg, prog, sched = make(ttfa_target_s=0.01, admission="prefill-first", decode_buckets=(1, 2))
    for rid in (1, 2, 3):
        add(sched, prog, rid, 0.0)
    w = lm(sched.decide(0.0))
    assert w.stage == "prefill" and [r.request_id for r in w.rows] == [1, 2, 3]
    finish(prog, sched, w, 0.0, 0.01)
    add(sched, prog, 4, 0.01)
    w = lm(sched.decide(0.01))
    assert w.stage == "prefill"  # never deferred
    finish(prog, sched, w, 0.01, 0.02)
    w = lm(sched.decide(0.02))
    assert w.stage == "decode" and [r.request_id for r in w.rows] == [1, 2] and w.bucket == 2


def test_least_slack_first_decode_when_rows_exceed_the_bucket():
    cfg, prog, sched = make(decode_buckets=(1, 2), admission="deadline", ttfa_target_s=1.0)
    add(sched, prog, 1, 0.0)
    add(sched, prog, 2, 0.5)  # later arrival: later first-chunk deadline, more slack
    add(sched, prog, 3, 0.2)
    w = lm(sched.decide(0.5))
    finish(prog, sched, w, 0.5, 0.51)
    w = lm(sched.decide(0.51))
    assert w.stage == "decode" and [r.request_id for r in w.rows] == [1, 3]


def test_waiting_for_resources_is_not_a_deferral_and_pages_return():
    cfg, prog, sched = make(kv_pages=20, kv_page_size=16, codec_slots=1, max_running=4)
    add(sched, prog, 1, 0.0, frames=10)
    add(sched, prog, 2, 0.0, frames=10)
    w = lm(sched.decide(0.0))
    assert [r.request_id for r in w.rows] == [1]  # one codec slot: the second waits
    used = sched.kv.used
    assert used == sched.kv.pages_for(prog.kv_tokens(w.rows[0].prompt))
    finish(prog, sched, w, 0.0, 0.01)
    assert sched.defer_since is None
    events = sched.cancel(1, 0.02)
    assert sched.kv.free == 20 and sched.slots.free == 1 and events
    w = lm(sched.decide(0.02))
    assert w.stage == "prefill" and [r.request_id for r in w.rows] == [2]


def test_the_lane_plan_is_the_one_bucket_rule():
    import pytest

    from voxcli.engine.lanes import BucketError, lane_layout

    plan = lane_layout(EngineConfig(policy="full", decode_buckets=(1, 2, 4, 8), urgent_buckets=(1, 2)))
    assert plan.bucket_for("lm", "decode", 3) == 4 and plan.bucket_for("lm", "decode", 8) == 8
    assert plan.bucket_for("urgent", "codec", 2) == 2 and plan.largest("background", "codec") == 32
    for n in (0, 9):
        with pytest.raises(BucketError):
            plan.bucket_for("lm", "decode", n)
    # Policies without an urgent lane have no urgent buckets (and the cuda executor captures none).
    sync2 = lane_layout(EngineConfig(policy="sync2"))
    assert sync2.lanes == ("lm", "background") and "urgent" not in (sync2.stages or {})
    with pytest.raises(BucketError, match="urgent"):
        sync2.buckets("urgent", "codec")
