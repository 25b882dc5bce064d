"""Paired requests (`Prompt.width` 2: a classifier-free-guidance pair sharing every forward pass) in the
pure scheduler: w rows toward max_running, max_prefill_batch, the largest decode bucket and every LM
batch's bucket; one Request, never split across batches."""

from __future__ import annotations

import pytest
from voxcli.models.base import InputError, SynthesisRequest

from voxcli.config import EngineConfig
from voxcli.engine.engine import Engine
from voxcli.engine.estimates import LatencyEstimator, default_profile
from voxcli.engine.executors.base import Completion, Work
from voxcli.engine.executors.stages import run_work
from voxcli.engine.scheduler import Scheduler
from voxcli.sim.synthetic import SyntheticProgram


def make(**kw):
    cfg = EngineConfig(executor="sim", admission="prefill-first", **kw)
    prog = SyntheticProgram()
    return prog, Scheduler(cfg, prog.spec, LatencyEstimator(default_profile(), cfg), prog.kv_tokens)


def add(sched, prog, rid, cfg_scale=None, t=0.0, frames=50):
    req = SynthesisRequest(text="hello there", fixed_frames=frames, cfg_scale=cfg_scale)
    r = sched.new_request(rid, prog.prepare(req), t)
    return r, sched.add(r, t)


def lm(sched, t):
    return next(w for w in sched.decide(t) if w.lane == "lm")


def finish(prog, sched, work: Work, t0: float, t1: float):
    return sched.complete(Completion(work, t0, t1, run_work(prog, work)))


def ids(work: Work) -> list[int]:
    return [r.request_id for r in work.rows]


def test_synthetic_program_pairs_requests_with_guidance():
    prog = SyntheticProgram()
    one = prog.prepare(SynthesisRequest(text="hi", fixed_frames=10))
    unit = prog.prepare(SynthesisRequest(text="hi", fixed_frames=10, cfg_scale=1.0))
    pair = prog.prepare(SynthesisRequest(text="hi", fixed_frames=10, cfg_scale=3.0))
    assert (one.width, unit.width, pair.width) == (1, 1, 2)
    assert prog.kv_tokens(pair) == 2 * prog.kv_tokens(one)  # KV reserved for both sequences
    with pytest.raises(InputError, match="cfg_scale"):
        prog.prepare(SynthesisRequest(text="hi", cfg_scale=0.5))


def test_pairs_count_two_rows_toward_max_running_and_the_prefill_bucket():
    prog, sched = make(max_running=3)
    add(sched, prog, 1, cfg_scale=3.0)
    add(sched, prog, 2, cfg_scale=3.0)
    add(sched, prog, 3)
    w = lm(sched, 0.0)
    # 2 rows admitted; the second pair would make 4 > 3, and the single behind it may not overtake it
    assert w.stage == "prefill" and ids(w) == [1] and w.bucket == 2
    assert w.tokens == 2 * w.rows[0].prompt.length
    finish(prog, sched, w, 0.0, 0.01)
    assert sched.decoding_rows == 2
    w = lm(sched, 0.01)
    assert w.stage == "decode" and ids(w) == [1] and w.bucket == 2
    finish(prog, sched, w, 0.01, 0.02)
    sched.cancel(1, 0.02)  # the pair leaves as one: both rows free at once
    assert sched.decoding_rows == 0
    w = lm(sched, 0.02)
    assert w.stage == "prefill" and ids(w) == [2, 3] and w.bucket == 3


def test_prefill_batch_cap_counts_rows():
    prog, sched = make(max_prefill_batch=3)
    for rid, scale in ((1, None), (2, 3.0), (3, None)):
        add(sched, prog, rid, cfg_scale=scale)
    w = lm(sched, 0.0)
    assert ids(w) == [1, 2] and w.bucket == 3


def test_decode_batch_fills_the_largest_bucket_with_whole_pairs():
    prog, sched = make(decode_buckets=(1, 2, 4), max_prefill_batch=8)
    for rid, scale in ((1, 3.0), (2, None), (3, 3.0), (4, None)):  # 6 rows
        add(sched, prog, rid, cfg_scale=scale)
    w = lm(sched, 0.0)
    assert w.stage == "prefill" and w.bucket == 6
    finish(prog, sched, w, 0.0, 0.01)
    w = lm(sched, 0.01)
    # admission order; the second pair no longer fits beside 3 rows, the single behind it does
    assert w.stage == "decode" and ids(w) == [1, 2, 4] and w.bucket == 4
    rows = sum(r.prompt.width for r in w.rows)
    assert rows == 4 and len(set(ids(w))) == len(ids(w))


def test_a_pair_wider_than_every_batch_is_rejected_with_the_reason():
    prog, sched = make(decode_buckets=(1,))
    r, events = add(sched, prog, 1, cfg_scale=3.0)
    assert r.state.value == "rejected" and events
    assert "guidance" in r.reason and "decode_buckets" in r.reason


def test_mixed_pairs_and_singles_run_to_completion_without_exceeding_row_limits():
    cfg = EngineConfig(executor="sim", max_running=5, decode_buckets=(1, 2, 4), max_prefill_batch=4)
    eng = Engine(SyntheticProgram(), cfg)
    seen: list[Work] = []
    launch = eng.executor.launch

    def record(work: Work) -> None:
        seen.append(work)
        assert eng.scheduler.decoding_rows + eng.scheduler.prefilling <= cfg.max_running
        launch(work)

    eng.executor.launch = record  # type: ignore[method-assign]
    streams = [eng.submit(SynthesisRequest(text="some words", fixed_frames=12 + i,
                                           cfg_scale=3.0 if i % 2 else None), at=0.01 * i)
               for i in range(8)]
    eng.run()
    assert [s.status for s in streams] == ["done"] * 8
    lm_works = [w for w in seen if w.lane == "lm"]
    assert lm_works
    for w in lm_works:
        rows = sum(r.prompt.width for r in w.rows)
        assert rows <= w.bucket and rows <= (4 if w.stage == "decode" else cfg.max_prefill_batch)
        assert w.bucket == (rows if w.stage == "prefill" else min(b for b in (1, 2, 4) if b >= rows))
    assert any(sum(r.prompt.width for r in w.rows) == 4 for w in lm_works if w.stage == "decode")


def test_a_row_cancelled_between_capped_decode_steps_gives_back_its_pages_and_slot():
    """Capped decode steps (more rows than the largest bucket) flag their rows one by one; the fast path
    of a completed step must clear those flags too, or a later cancel never releases the row."""
    prog, sched = make(decode_buckets=(1, 2), max_running=4, max_prefill_batch=4)
    reqs = [add(sched, prog, rid)[0] for rid in (1, 2, 3)]
    t = 0.0
    w = lm(sched, t)
    assert w.stage == "prefill"
    finish(prog, sched, w, t, t + 0.01)
    for _ in range(3):
        t += 0.01
        w = lm(sched, t)
        assert w.stage == "decode" and w.bucket == 2  # capped: 3 rows, largest bucket 2
        finish(prog, sched, w, t, t + 0.005)
    r = reqs[0]
    assert r.pages and r.slot >= 0 and not r.lm_inflight and not r.chunk_inflight
    sched.cancel(r.id, t + 0.01)
    assert r.pages == [] and r.slot == -1
