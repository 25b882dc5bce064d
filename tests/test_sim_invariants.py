"""Engine invariants on the sim executor over randomized workloads (the observer checks every batch)."""

from __future__ import annotations

import pytest
from support.engine_workload import check_outcomes, run_sim, workload

from voxcli.config import EngineConfig

AMPLE = dict(executor="sim", kv_pages=65536, codec_slots=4096, max_running=4096, max_queue=4096)


def test_full_policy_1000_requests_invariants():
    # a tight TTFA target makes new requests short on slack, so deadline admission has to defer
    cfg = EngineConfig(policy="full", admission="deadline", ttfa_target_s=0.06, **AMPLE)
    reqs = workload(1000, rate=40.0, seed=1)
    eng, obs, streams = run_sim(cfg, reqs)
    statuses = check_outcomes(eng, obs, streams, reqs)
    assert statuses["done"] > 800 and statuses["failed"] > 5 and statuses["cancelled"] > 5, statuses
    c = obs.counts
    # the rules were exercised, not vacuously true
    assert c["urgent"] > 500 and c["background"] > 100, c
    assert c["bg_by_size"] > 0 and c["bg_by_deadline"] + c["bg_by_idle"] > 0, c
    assert c["max_defer_run"] > 0, "deadline admission never deferred a prefill in this workload"


@pytest.mark.parametrize("policy,admission", [("full", "prefill-first"), ("lanes", "deadline"),
                                              ("sync2", "deadline"), ("sync", "prefill-first")])
def test_other_policies_invariants(policy, admission):
    cfg = EngineConfig(policy=policy, admission=admission, **AMPLE)
    reqs = workload(250, rate=30.0, seed=2)
    eng, obs, streams = run_sim(cfg, reqs)
    statuses = check_outcomes(eng, obs, streams, reqs)
    assert statuses["done"] > 200, statuses
    if policy != "full":
        assert obs.counts["urgent"] == 0


def test_same_seed_same_decisions():
    cfg = EngineConfig(policy="full", **AMPLE)
    reqs = workload(300, rate=40.0, seed=3)
    _, obs1, s1 = run_sim(cfg, reqs)
    _, obs2, s2 = run_sim(cfg, workload(300, rate=40.0, seed=3))
    assert obs1.log == obs2.log and len(obs1.log) > 1000
    assert [s.timeline for s in s1] == [s.timeline for s in s2]
    _, obs3, _ = run_sim(cfg, workload(300, rate=40.0, seed=4))
    assert obs3.log != obs1.log


def test_bounded_pools_queue_and_reject():
    # small pools: requests wait for pages/slots, the queue bound refuses the overflow with a reason
    # (deadline admission: the TTFA gate would refuse them earlier, see test_admission_gate.py)
    cfg = EngineConfig(executor="sim", policy="full", admission="deadline", kv_pages=48, kv_page_size=16,
                       codec_slots=6, max_running=8, max_queue=20)
    reqs = workload(300, rate=60.0, seed=5)
    eng, obs, streams = run_sim(cfg, reqs, check_deferral=False)
    rejected = [s for s in streams if s.status == "rejected"]
    assert rejected and all("queue is full" in s.reason for s in rejected)
    for s in streams:
        if s.status == "rejected":
            s.status  # noqa: B018
            with pytest.raises(Exception, match="refused"):
                s.wait()
    kept = [(s, r) for s, r in zip(streams, reqs, strict=True) if s.status != "rejected"]
    check_outcomes(eng, obs, [s for s, _ in kept], [r for _, r in kept])
    assert max(len(obs.slot_owner), 0) <= cfg.codec_slots


def test_request_larger_than_pool_is_refused():
    from voxcli.models.base import SynthesisRequest

    cfg = EngineConfig(executor="sim", kv_pages=8, kv_page_size=16)
    reqs = [(0.0, SynthesisRequest(text="long", fixed_frames=500), None),
            (0.01, SynthesisRequest(text="short", fixed_frames=20), None)]
    eng, obs, streams = run_sim(cfg, reqs)
    assert streams[0].status == "rejected" and "kv_pages" in streams[0].reason
    assert streams[1].status == "done"
