"""The TTFA gate (admission = "ttfa-gate") on hand-made timelines: what it predicts, whom it admits,
whom it refuses and the retry-after it gives."""

from __future__ import annotations

import pytest
from voxcli.models.base import SynthesisRequest

from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.engine import Engine
from voxcli.engine.estimates import LatencyEstimator, default_profile
from voxcli.engine.executors.base import Completion
from voxcli.engine.executors.stages import run_work
from voxcli.engine.request import RequestState
from voxcli.engine.scheduler import Ended, Scheduler
from voxcli.engine.stream import RequestRejected
from voxcli.sim.synthetic import SyntheticProgram

CHUNK = ChunkSchedule(first=4, steady=10)


def make(**kw):
    cfg = EngineConfig(executor="sim", admission="ttfa-gate", chunk=CHUNK, **kw)
    prog = SyntheticProgram(chunk=CHUNK)
    sched = Scheduler(cfg, prog.spec, LatencyEstimator(default_profile(), cfg), prog.kv_tokens)
    return cfg, prog, sched


def request(sched, prog, rid, t, frames=200):
    return sched.new_request(rid, prog.prepare(SynthesisRequest(text="hello there", fixed_frames=frames)), t)


def test_an_idle_engine_admits_with_the_estimators_ttfa():
    cfg, prog, sched = make(ttfa_target_s=0.2)
    r = request(sched, prog, 1, 0.0)
    r.need_pages = sched.kv.pages_for(prog.kv_tokens(r.prompt))
    v = sched.gate.predict(sched, r, 0.0)
    est = sched.est
    # nothing ahead: prefill + 4 first-chunk frames x one decode step + a one-chunk urgent codec call
    expected = est.prefill(r.prompt.length, 1) + 4 * est.decode_step(1) + est.codec("urgent", 1, 4)
    assert v.admit and v.predicted_ttfa == pytest.approx(expected) and v.retry_after is None
    assert sched.add(r, 0.0) == [] and list(sched.waiting) == [r]


def test_a_request_that_cannot_meet_ttfa_is_refused_with_a_retry_after():
    # target between the first request's prediction and the second's: the one queued ahead shares its
    # prefill batch, so it costs the second its tokens and one more decode row
    cfg, prog, sched = make(ttfa_target_s=0.2)
    r1 = request(sched, prog, 1, 0.0)
    assert sched.add(r1, 0.0) == []
    r2 = request(sched, prog, 2, 0.0)
    est = sched.est
    alone = est.prefill(r1.prompt.length, 1) + 4 * est.decode_step(1) + est.codec("urgent", 1, 4)
    predicted = est.prefill(r1.prompt.length + r2.prompt.length, 2) + 4 * est.decode_step(2) \
        + est.codec("urgent", 1, 4)
    target = r2.ttfa_target = (alone + predicted) / 2
    events = sched.add(r2, 0.0)
    assert [type(e) for e in events][0] is Ended and r2.state is RequestState.REJECTED
    assert "predicted time to first audio" in r2.reason and "1 queued ahead" in r2.reason
    assert r2.retry_after == pytest.approx(predicted - target)
    assert list(sched.waiting) == [r1]  # the refused request never entered the queue


def test_a_request_queued_behind_another_is_predicted_in_its_prefill_batch():
    # Issue 17: the gate charged each request queued ahead a prefill batch and a decode step of its
    # own, then this request's prefill apart, and so refused what the LM lane serves in time: it
    # prefills the queue's head together. Target between the two predictions: now admitted.
    cfg, prog, sched = make(ttfa_target_s=0.2)
    r1, r2 = request(sched, prog, 1, 0.0), request(sched, prog, 2, 0.0)
    est = sched.est
    assert sched.add(r1, 0.0) == []
    tail = 4 * est.decode_step(2) + est.codec("urgent", 1, 4)
    joint = est.prefill(r1.prompt.length + r2.prompt.length, 2) + tail
    apart = est.prefill(r1.prompt.length, 1) + est.decode_step(1) + est.prefill(r2.prompt.length, 1) + tail
    target = (joint + apart) / 2
    r2.ttfa_target = target
    assert sched.add(r2, 0.0) == [] and list(sched.waiting) == [r1, r2]
    assert sched.gate.predicted[r2.id] == pytest.approx(joint) and joint < target < apart
    # the timeline the prediction stands on: the next LM launch prefills both
    w = next(w for w in sched.decide(0.0) if w.lane == "lm")
    assert w.stage == "prefill" and [row.request_id for row in w.rows] == [1, 2]
    assert est.predict(w) == pytest.approx(joint - tail)


def test_no_free_codec_slot_in_time_is_refused_until_a_holder_finishes_playing():
    cfg, prog, sched = make(ttfa_target_s=0.2, codec_slots=1)
    r1 = request(sched, prog, 1, 0.0, frames=100)  # 8 s of audio holds the only slot
    sched.add(r1, 0.0)
    w = next(w for w in sched.decide(0.0) if w.lane == "lm")
    took = sched.est.predict(w)  # as estimated: the gate's observed/estimated ratios stay 1
    sched.complete(Completion(w, 0.0, took, run_work(prog, w)))
    r2 = request(sched, prog, 2, took)
    sched.add(r2, took)
    assert r2.state is RequestState.REJECTED and "for free codec slots" in r2.reason
    # the slot comes back when r1's last chunk is decoded: about its playback deadline (its first audio
    # is not out yet, so arrival + target stands in for it), less the urgent margin
    slot_free = 0.2 + (100 - 10) * prog.spec.frame_seconds - cfg.urgent_margin_s
    est = sched.est
    predicted = (slot_free - took) + est.prefill(r2.prompt.length, 1) + 4 * est.decode_step(2) \
        + est.codec("urgent", 1, 4)
    assert r2.retry_after == pytest.approx(predicted - 0.2) and r2.retry_after > 7.0


def test_a_codec_behind_its_deadlines_refuses_new_work():
    cfg, prog, sched = make(ttfa_target_s=0.2, background_min_batch=64)
    # 40 requests have delivered their first chunk and each has a continuation chunk due in 50 ms
    from voxcli.engine.request import Chunk

    for rid in range(1, 41):
        r = request(sched, prog, rid, 0.0)
        sched.requests[r.id] = r
        r.t_first_audio = 0.0
        sched.chunks.add(Chunk(request=r, index=1, start=4, end=14, last=False, t_ready=0.0, deadline=0.05))
    late = request(sched, prog, 99, 0.0)
    sched.add(late, 0.0)
    assert late.state is RequestState.REJECTED and "codec is" in late.reason
    # two background batches of 32 back to back; the second ends past the 50 ms deadline
    t32 = sched.est.codec("background", 32)
    assert late.retry_after == pytest.approx(2 * t32 - 0.05)


def test_the_gate_learns_its_error_and_grows_its_safety_factor():
    cfg, prog, sched = make(ttfa_target_s=0.2)
    gate = sched.gate
    for i in range(20):  # 20 admitted requests whose first audio came twice as late as predicted
        r = request(sched, prog, 100 + i, 0.0)
        gate.predicted[r.id] = 0.05
        gate.first_audio(r, 0.1)
    assert gate.safety == pytest.approx(2.0)
    r = request(sched, prog, 1, 0.0)
    v = gate.predict(sched, r, 0.1)
    assert v.admit and v.predicted_ttfa > 2 * 0.03
    # the window forgets: 2 s later the history is gone and predictions are the estimator's again
    r3 = request(sched, prog, 3, 0.0)
    assert gate.predict(sched, r3, 2.2).predicted_ttfa < v.predicted_ttfa and gate.safety == 1.0


def test_the_engine_raises_the_refusal_with_its_retry_after():
    # a target between one request's predicted TTFA and that of a second prefilled beside it
    cfg = EngineConfig(executor="sim", admission="ttfa-gate", chunk=CHUNK)
    est, prog = LatencyEstimator(default_profile(), cfg), SyntheticProgram(chunk=CHUNK)
    length = prog.prepare(SynthesisRequest(text="a", fixed_frames=20)).length
    alone = est.prefill(length, 1) + 4 * est.decode_step(1) + est.codec("urgent", 1, 4)
    beside = est.prefill(2 * length, 2) + 4 * est.decode_step(2) + est.codec("urgent", 1, 4)
    eng = Engine(prog, cfg.replace(ttfa_target_s=(alone + beside) / 2))
    s1 = eng.submit(SynthesisRequest(text="a", fixed_frames=20), at=0.0)
    s2 = eng.submit(SynthesisRequest(text="b", fixed_frames=20), at=0.0)
    eng.run()
    assert s1.status == "done" and s2.status == "rejected"
    with pytest.raises(RequestRejected) as e:
        s2.wait()
    assert e.value.retry_after is not None and e.value.retry_after > 0 and "retry later" in str(e.value)


def test_urgency_chunking_admits_with_the_largest_first_chunk_the_slack_allows():
    from voxcli.engine.admission import urgent_schedule

    ramped = ChunkSchedule(first=2, ramp=(4, 8), steady=10)
    assert urgent_schedule(ChunkSchedule(first=10, steady=10), 2) == ramped
    ten = ChunkSchedule(first=10, steady=10)

    def sched_with(**kw):
        cfg = EngineConfig(executor="sim", admission="ttfa-gate", chunk=ten, **kw)
        prog = SyntheticProgram(chunk=ten)
        return prog, Scheduler(cfg, prog.spec, LatencyEstimator(default_profile(), cfg), prog.kv_tokens)

    prog, s = sched_with(ttfa_target_s=1.0)
    est = s.est
    r = request(s, prog, 1, 0.0)
    base = est.prefill(r.prompt.length, 1)
    with_10 = base + 10 * est.decode_step(1) + est.codec("urgent", 1, 10)
    with_5 = base + 5 * est.decode_step(1) + est.codec("urgent", 1, 5)
    target = (with_10 + with_5) / 2
    # fixed chunking: a 10-frame first chunk misses the target, so the request is refused
    prog, fixed = sched_with(ttfa_target_s=target)
    r = request(fixed, prog, 1, 0.0)
    fixed.add(r, 0.0)
    assert r.state is RequestState.REJECTED
    # urgency chunking: half the first chunk fits; the rest ramps back up to the steady size
    prog, urgent = sched_with(ttfa_target_s=target, urgency_chunking=True)
    r = request(urgent, prog, 1, 0.0)
    assert urgent.add(r, 0.0) == [] and r.schedule == ChunkSchedule(first=5, ramp=(), steady=10)
    assert r.next_end == r.gen_end == 5


def test_adaptive_batching_raises_b_with_the_background_lanes_load():
    from voxcli.engine.executors.base import Work

    cfg, prog, sched = make(adaptive_batching=True, background_min_batch=8)
    w = Work(lane="background", stage="codec", rows=[], bucket=8, tag=[])
    t = 0.0
    for _ in range(30):  # back-to-back batches: the lane is busy all the time
        sched.busy["background"] = True
        sched.complete(Completion(w, t, t + 0.05, []))
        t += 0.05
    assert sched.codec.background_min == 32
    for _ in range(30):  # one 5 ms batch every 100 ms: mostly idle, B falls back to the configured 8
        sched.busy["background"] = True
        sched.complete(Completion(w, t + 0.095, t + 0.1, []))
        t += 0.1
    assert sched.codec.background_min == 8


def test_a_queue_longer_than_the_running_rows_waits_in_waves():
    # one decode row: the two queued requests run one after the other once the running one finishes
    cfg, prog, sched = make(ttfa_target_s=0.2, max_running=1)
    r1 = request(sched, prog, 1, 0.0, frames=100)
    sched.add(r1, 0.0)
    w = next(w for w in sched.decide(0.0) if w.lane == "lm")
    took = sched.est.predict(w)
    sched.complete(Completion(w, 0.0, took, run_work(prog, w)))
    for rid in (2, 3):  # queued behind it (as deadline admission would have queued them)
        q = request(sched, prog, rid, took, frames=50)
        q.need_pages = sched.kv.pages_for(prog.kv_tokens(q.prompt))
        sched.requests[q.id] = q
        sched.waiting.append(q)
    late = request(sched, prog, 4, took)
    sched.add(late, took)
    est = sched.est
    step = est.decode_step(1)
    wait = (100 - r1.n_frames) * step + 2 * 50 * step  # r1's rest, then two waves of 50 frames
    predicted = wait + est.prefill(late.prompt.length, 1) + 4 * step + est.codec("urgent", 1, 4)
    assert late.state is RequestState.REJECTED and "for free decode rows" in late.reason
    assert late.retry_after == pytest.approx(predicted - 0.2)
