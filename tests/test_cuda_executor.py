"""The cuda executor's logic on the CPU: bucket selection, graph-table keys, lane placement, launch / event
polling / finish, eager fallback, cross-stream ordering. Device operations are an eager stand-in
(`FakeOps`, tests/support/cuda_fakes.py); the real CUDA path is exercised by the CUDA-only test at the end
and by gpu_check."""

from __future__ import annotations

import time

import pytest
import torch
from support.cuda_fakes import FakeOps, FakeProgram, R, fake_lane_streams

from voxcli.config import EngineConfig
from voxcli.engine.executors.base import Work
from voxcli.engine.executors.cuda import BucketError, CudaExecutor, GraphStage, graph_keys
from voxcli.engine.lanes import lane_layout

# ---------------------------------------------------------------- the lane plan, as the executor reads it
FULL = lane_layout(EngineConfig(policy="full"))


@pytest.mark.parametrize(("n", "bucket"), [(1, 1), (2, 2), (3, 4), (5, 8), (8, 8), (200, 256)])
def test_the_bucket_is_the_smallest_that_fits(n, bucket):
    assert FULL.bucket_for("lm", "decode", n) == bucket


@pytest.mark.parametrize("n", [0, 9])
def test_empty_and_oversized_batches_have_no_bucket(n):
    with pytest.raises(BucketError, match="bucket|row"):
        FULL.bucket_for("urgent", "codec", n)


def test_graph_keys_for_the_full_policy():
    cfg = EngineConfig(policy="full")
    keys = graph_keys(cfg)
    assert len(keys) == len(set(keys)) == 9 + 6 + 4
    assert {k for k in keys if k[0] == "backbone"} == {("backbone", "decode", b) for b in cfg.decode_buckets}
    assert {k for k in keys if k[0] == "codec"} == {("codec", "codec", b) for b in cfg.background_buckets}
    assert {k for k in keys if k[0] == "device"} == {("device", "codec", b) for b in (1, 2, 4, 8)}
    assert not any(k[1] == "prefill" for k in keys)  # prefill runs eagerly
    backbone = [k[2] for k in keys if k[0] == "backbone"]
    assert backbone == sorted(backbone, reverse=True)  # largest first: smaller captures reuse the pool


def test_unsplit_policies_keep_one_partition_name_per_lane_and_capture_no_urgent_graphs():
    for policy in ("sync", "sync2", "lanes"):
        plan = lane_layout(EngineConfig(policy=policy))
        parts = set(plan.partition.values())
        assert len(parts) == 2 and all(p.startswith("whole/") for p in parts)
        keys = graph_keys(EngineConfig(policy=policy))
        assert len(keys) == 9 + 6 and not any(k[0].endswith("urgent") for k in keys)  # no lane uses them
    assert set(lane_layout(EngineConfig(policy="sync")).stream.values()) == {"lm"}
    assert lane_layout(EngineConfig(policy="sync2")).stream["background"] == "codec"
    assert (FULL.partition["urgent"], FULL.stream["urgent"]) == ("device", "device")


def make(policy="full", graphed=True, hold=False):
    ops = FakeOps(hold=hold)
    cfg = EngineConfig(policy=policy, decode_buckets=(1, 2, 4, 8), background_buckets=(1, 4, 16))
    prog = FakeProgram(graphed, ops)
    ex = CudaExecutor(prog, cfg, streams=fake_lane_streams(policy == "full"), ops=ops)
    return ex, prog, ops


# ---------------------------------------------------------------- executor
def test_startup_captures_every_key_on_its_lanes_stream_and_pool():
    ex, _, ops = make()
    assert set(ex.graphs) == set(graph_keys(ex.config))
    captures = [e for e in ops.log if e[0] == "capture"]
    assert len(captures) == 4 + 3 + 4
    by_stream = {}
    for _, stream, pool in captures:
        by_stream.setdefault(stream, set()).add(id(pool))
    assert set(by_stream) == {"s-lm", "s-codec", "s-device"}
    assert all(len(p) == 1 for p in by_stream.values())  # one pool per lane ...
    assert len({next(iter(p)) for p in by_stream.values()}) == 3  # ... and never shared between lanes
    ex.close()


def test_decode_batch_uses_the_smallest_bucket_graph_and_finishes_from_host_copies():
    ex, prog, ops = make()
    ex.launch(Work("lm", "decode", [R(1.0), R(2.0), R(3.0)], bucket=4))
    assert ex.busy("lm")
    [c] = ex.wait(None)
    assert c.error is None and c.result == [2.0, 4.0, 6.0]
    assert prog.loads[-1] == ("decode", 4, "lm", "s-lm")
    assert ("replay", "s-lm") in ops.log
    assert not ex.busy("lm") and c.finished >= c.started
    ex.close()


def test_a_batch_the_graph_does_not_accept_runs_eagerly_on_the_lane_stream():
    ex, prog, ops = make()
    ex.launch(Work("urgent", "codec", [R(1.0, slot=0), R(1000.0, slot=1)], bucket=2))
    [c] = ex.wait(None)
    assert c.error is None and c.result == [10.0, 10000.0]  # the eager path, not the graph's x + 100
    assert prog.eager_calls[-1][:2] == ("codec", "s-device")
    assert not any(load[0] == "codec" for load in prog.loads)
    ex.close()


def test_urgent_and_background_codec_run_on_their_own_streams_concurrently():
    ex, prog, ops = make(hold=True)
    ex.launch(Work("urgent", "codec", [R(1.0, slot=0)], bucket=1))
    ex.launch(Work("background", "codec", [R(2.0, slot=1), R(3.0, slot=2)], bucket=4))
    assert ex.busy("urgent") and ex.busy("background")
    assert ex.wait(ex.now() + 0.005) == []  # events pending: nothing completes
    ops.release()
    done = {c.work.lane: c.result for c in ex.wait(None)}
    assert done == {"urgent": [101.0], "background": [102.0, 103.0]}
    assert {(s, b, lane, st) for s, b, lane, st in prog.loads} == {
        ("codec", 1, "urgent", "s-device"),
        ("codec", 4, "background", "s-codec"),
    }
    assert not any(e[0] == "wait" for e in ops.log)  # disjoint slots: no cross-lane ordering
    ex.close()


def test_codec_batches_sharing_a_slot_are_ordered_on_the_device():
    ex, _, ops = make(hold=True)
    ex.launch(Work("urgent", "codec", [R(1.0, slot=7)], bucket=1))
    ex.launch(Work("background", "codec", [R(2.0, slot=7)], bucket=1))
    assert ("wait", "s-codec", "s-device") in ops.log
    ops.release()
    ex.wait(None)
    ex.close()


def test_prefill_runs_eagerly_on_the_whole_device_and_decode_waits_for_it():
    ex, prog, ops = make()
    ex.launch(Work("lm", "prefill", [R(1.0)], bucket=1))
    [c] = ex.wait(None)
    assert c.result == [10.0]
    name, stream, thread = prog.eager_calls[-1]
    assert (name, stream) == ("prefill", "s-prefill") and thread.startswith("vox-lm")
    ex.launch(Work("lm", "decode", [R(1.0)], bucket=1))
    ex.wait(None)
    assert ("wait", "s-lm", "s-prefill") in ops.log  # KV written by prefill before decode reads it
    ex.close()


def test_program_without_graph_hook_runs_every_stage_eagerly_on_lane_threads():
    ex, prog, ops = make(graphed=False)
    assert ex.graphs == {} and len(ex.eager_keys) == 11
    ex.launch(Work("lm", "decode", [R(1.0), R(2.0)], bucket=2))
    ex.launch(Work("background", "codec", [R(3.0)], bucket=1))
    results = {c.work.lane: c.result for c in _drain(ex, 2)}
    assert results == {"lm": [10.0, 20.0], "background": [30.0]}
    streams = {(n, s) for n, s, _ in prog.eager_calls}
    assert streams == {("decode", "s-lm"), ("codec", "s-codec")}
    ex.close()


def test_errors_come_back_in_completions_and_free_the_lane():
    ex, _, _ = make()
    ex.launch(Work("lm", "decode", [R(-1.0)], bucket=1))
    [c] = ex.wait(None)
    assert isinstance(c.error, ValueError) and not ex.busy("lm")
    ex.launch(Work("urgent", "codec", [R(1.0)] * 9, bucket=9))
    [c] = ex.wait(None)
    assert isinstance(c.error, BucketError)
    ex.close()


def test_launch_on_a_busy_lane_is_refused():
    ex, _, ops = make(hold=True)
    ex.launch(Work("lm", "decode", [R(1.0)], bucket=1))
    with pytest.raises(RuntimeError, match="in flight"):
        ex.launch(Work("lm", "decode", [R(1.0)], bucket=1))
    ops.release()
    ex.wait(None)
    ex.close()


def test_wait_returns_at_until_and_immediately_when_idle():
    ex, _, _ = make()
    assert ex.wait(None) == []
    t0 = time.perf_counter()
    assert ex.wait(t0 + 0.01) == []
    assert time.perf_counter() - t0 >= 0.009
    ex.close()


def test_sync_policy_puts_every_lane_on_one_stream():
    ex, prog, _ = make(policy="sync")
    assert set(ex.stream_of) == {"lm", "background"}
    ex.launch(Work("background", "codec", [R(1.0)], bucket=1))
    ex.wait(None)
    ex.launch(Work("lm", "prefill", [R(1.0)], bucket=1))
    ex.wait(None)
    assert prog.loads[-1][3] == "s-lm" and prog.eager_calls[-1][1] == "s-lm"
    ex.close()


def _drain(ex, n):
    out = []
    while len(out) < n:
        out += ex.wait(None)
    return out


# ---------------------------------------------------------------- real CUDA (skips here)
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the CPU CI has none)")
def test_real_graphs_replay_on_lane_streams():
    cfg = EngineConfig(policy="full", decode_buckets=(1, 4), background_buckets=(1, 4), urgent_buckets=(1, 4))
    ex = CudaExecutor(_CudaProgram(), cfg)
    ex.launch(Work("lm", "decode", [R(1.0), R(2.0), R(3.0)], bucket=4))
    ex.launch(Work("urgent", "codec", [R(5.0, slot=0)], bucket=1))
    results = {c.work.lane: c.result for c in _drain(ex, 2)}
    assert results == {"lm": [2.0, 4.0, 6.0], "urgent": [105.0]}
    ex.close()


class _CudaProgram(FakeProgram):
    def graph_stage(self, stage, bucket, lane, device):
        x = torch.zeros(bucket, device=device)
        host = torch.zeros(bucket).pin_memory()

        def run():
            return {"y": x * 2 if stage == "decode" else x + 100}

        def load(rows):
            host.zero_()
            host[: len(rows)] = torch.tensor([r.value for r in rows])
            x.copy_(host, non_blocking=True)

        def finish(rows, out):
            return [float(out["y"][i]) for i in range(len(rows))]

        return GraphStage(run=run, load=load, finish=finish)


def test_a_bad_row_fails_alone_on_the_eager_path_and_after_a_codec_graph_refused_the_batch():
    """Fault isolation: the eager stage raises for the batch, the executor re-runs it in parts (one
    completion, no error), and only the bad row holds an exception; a codec graph whose load refuses a
    chunk hands the batch to the same eager isolation. A graphed decode's load error still fails it."""
    ex, prog, ops = make()
    ex.launch(Work("lm", "decode", [R(1000.0), R(-1.0), R(2000.0)], bucket=4))  # not graphable: eager
    [c] = ex.wait(None)
    assert c.error is None and c.reruns > 0
    assert c.result[0] == 10000.0 and isinstance(c.result[1], ValueError) and c.result[2] == 20000.0
    ex.launch(Work("urgent", "codec", [R(1.0, slot=0), R(-1.0, slot=1), R(2.0, slot=2)], bucket=4))
    [c] = ex.wait(None)
    assert c.error is None and c.result[0] == 10.0 and isinstance(c.result[1], ValueError)
    assert c.result[2] == 20.0 and prog.eager_calls[-1][:2] == ("codec", "s-device")
    ex.close()
