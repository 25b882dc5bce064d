"""The CUDA launch path on the CPU with stricter fakes (tests/support/launch_fakes.py): FlashInfer's run()
needs a prior plan(), so the executor must prime each graph stage before warm-up and capture; preparing a
launch (the stage's load + the attention plan) makes no synchronous host<->device copy; one FlashInfer
workspace per lane; the decode graph's KV bound is the engine's, not the model's context; and the graphed
decode through the FlashInfer path equals the eager decode."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from support.launch_fakes import CopyRecorder, DeviceLedger, StrictDecodeWrapper, strict_flashinfer
from voxcli.models import paged_attention as A
from voxcli.models.base import ResourceLimits, Row, SynthesisRequest
from voxcli.models.qwen3_tts import graph_stages as GS
from voxcli.models.qwen3_tts.program import Qwen3TTSProgram

from voxcli.config import EngineConfig
from voxcli.engine.executors.base import Work
from voxcli.engine.executors.cuda import CudaExecutor
from voxcli.engine.partitions import LaneStreams

PAGE, PAGES = 4, 96


@pytest.fixture()
def cv(tiny_custom_voice) -> Qwen3TTSProgram:
    p = Qwen3TTSProgram.load(str(tiny_custom_voice))
    p.init_kv(PAGES, PAGE)
    p.init_codec_slots(8)
    return p


@pytest.fixture()
def ledger(monkeypatch) -> DeviceLedger:
    """FlashInfer = the strict fake, for every decode stage the program builds."""
    led = DeviceLedger()
    fake = strict_flashinfer(led)
    monkeypatch.setattr(A, "load_flashinfer", lambda: fake)
    orig = GS.DecodeGraphStage

    def forced(program, bucket, device, *args, **kw):  # noqa: ANN001, ANN202
        return orig(program, bucket, device, "flashinfer", **{k: v for k, v in kw.items() if k == "lane"})

    monkeypatch.setattr(GS, "DecodeGraphStage", forced)
    return led


def _rows(cv: Qwen3TTSProgram, n: int, first_page: int) -> list[Row]:
    rows, page = [], first_page
    for i in range(n):
        req = SynthesisRequest(text="Hello world. This is a tiny test.", voice="serena", seed=3 + i,
                               fixed_frames=6 + i)
        prompt = cv.prepare(req)
        need = -(-cv.kv_tokens(prompt) // PAGE)
        rows.append(Row(request_id=i, prompt=prompt, pages=list(range(page, page + need))))
        page += need
    return rows


class _CaptureOps:
    """Device stand-in whose capture runs warm-ups and the capture itself (as TorchCudaOps does)."""

    device = torch.device("cpu")
    warmup_runs = 2

    @contextlib.contextmanager
    def on(self, stream):  # noqa: ANN001
        yield

    def event(self):
        return object()

    def record(self, event, stream):  # noqa: ANN001
        pass

    def done(self, event):  # noqa: ANN001
        return True

    def wait_event(self, stream, event):  # noqa: ANN001
        pass

    def pool(self):
        return object()

    def capture(self, run, stream, pool):  # noqa: ANN001
        for _ in range(self.warmup_runs):
            run()
        return run, run()

    def replay(self, graph):  # noqa: ANN001
        graph()

    def host_mirror(self, t):  # noqa: ANN001
        return torch.empty_like(t)

    def synchronize(self):
        pass


def _streams() -> LaneStreams:
    return LaneStreams(lm="s-lm", codec="s-codec", device="s-device", green=True, total_sms=132, lm_sms=96,
                       codec_sms=32, priorities={"device": -5, "lm": -4, "codec": 0}, prefill="s-prefill")


def test_capture_primes_flashinfer_before_warmup_and_touches_only_the_scratch_page(cv, ledger):
    cfg = EngineConfig(policy="full", decode_buckets=(1, 4), background_buckets=(1,), urgent_buckets=(1,))
    before = cv.k_pool.clone()
    ex = CudaExecutor(cv, cfg, streams=_streams(), ops=_CaptureOps())
    try:
        assert {k[2] for k in ex.graphs if k[1] == "decode"} == {1, 4}
        assert all(w.plans >= 1 for w in StrictDecodeWrapper.instances)
        real = [p for p in range(PAGES) if p != cv.scratch_page]
        assert torch.equal(cv.k_pool[:, real], before[:, real])  # warm-ups wrote only the scratch page
        # The graphed decode through the FlashInfer path equals the eager decode, step after step.
        eager, graphed = _rows(cv, 3, 0), _rows(cv, 3, PAGES // 2)
        cv.prefill(eager)
        cv.prefill(graphed)
        for _ in range(3):
            ex.launch(Work(lane="lm", stage="decode", rows=graphed, bucket=4))
            (done,) = ex.wait(None)
            assert done.error is None
            for w, g in zip(cv.decode(eager), done.result, strict=True):
                np.testing.assert_array_equal(w.frame, g.frame)
    finally:
        ex.close()


def test_one_flashinfer_workspace_per_lane(cv, ledger):
    for b in (1, 2, 4, 8):
        cv.graph_stage("decode", b, "lm", torch.device("cpu"))
    cv.graph_stage("decode", 2, "other", torch.device("cpu"))
    lm = {w.workspace.data_ptr() for w in StrictDecodeWrapper.instances[:4]}
    assert len(StrictDecodeWrapper.instances) == 5 and len(lm) == 1
    assert StrictDecodeWrapper.instances[4].workspace.data_ptr() not in lm


def test_preparing_a_decode_launch_makes_no_synchronous_copy(cv, ledger, monkeypatch):
    # As on a GPU, every static device buffer gets its own host staging twin (on a CPU device the stage
    # would write the buffer itself, and host writes could not be told from device writes).
    monkeypatch.setattr(GS, "_staging", lambda t: torch.empty_like(t))
    rows = _rows(cv, 3, 0)
    cv.prefill(rows)
    stage = GS.DecodeGraphStage(cv, 4, torch.device("cpu"), "flashinfer")
    a = stage.attn
    ledger.mark(*stage.s.dev.values(), *stage.out.values(), cv.k_pool, cv.v_pool,
                *[getattr(a, n) for n in ("write_page", "write_offset", "indptr_buf", "indices_buf",
                                          "last_len_buf", "indices_stage") if hasattr(a, n)])
    for r in rows:  # prompt-side tensors live on the device with the prompt
        ledger.mark(r.state.trailing, r.state.tts_pad)
    with CopyRecorder(ledger) as rec:
        stage.load(rows)
    assert rec.syncs == []
    # Sanity: the recorder does catch a synchronous copy into device memory.
    with CopyRecorder(ledger) as rec:
        stage.s.dev["c0"].copy_(torch.zeros(4, dtype=torch.int64))
    assert rec.syncs == ["copy_ H2D without non_blocking"]


def test_codec_prime_and_load_make_no_synchronous_copy(cv, monkeypatch):
    monkeypatch.setattr(GS, "_staging", lambda t: torch.empty_like(t))
    led = DeviceLedger()
    stage = GS.CodecGraphStage(cv, 2, torch.device("cpu"), 8)
    led.mark(*stage.s.dev.values(), *stage.out.values(), *cv.codec_model.slots.values())
    with CopyRecorder(led) as rec:
        stage.prime()
    assert rec.syncs == [] and stage.s.dev["slots"].tolist() == [cv.scratch_slot] * 2


def test_decode_graphs_are_sized_by_the_engines_limits_not_the_model_context(cv):
    cv.set_limits(ResourceLimits(max_kv_tokens_per_row=50, max_chunk_frames=8))
    stage = GS.DecodeGraphStage(cv, 2, torch.device("cpu"))
    assert stage.attn.max_pages == 13 and stage.attn.positions.numel() == 52  # ceil(50 / 4) pages of 4
    assert cv.graph_stage("codec", 1, "urgent", torch.device("cpu")) is not None
    rows = _rows(cv, 1, 0)
    assert stage.accepts(rows)
    rows[0].kv_len = 52
    assert not stage.accepts(rows)  # past the bound: the executor runs this batch eagerly


def test_the_engine_hands_its_limits_to_the_program(cv):
    from voxcli.engine.engine import Engine

    cfg = EngineConfig(executor="cpu", kv_pages=200, kv_page_size=PAGE, max_prefill_tokens=300,
                       max_frames=100, codec_slots=4)
    with Engine(cv, cfg) as eng:
        limits = cv.limits
        assert limits.max_kv_tokens_per_row == 300 + 100 + 1
        assert limits.max_chunk_frames == max(eng.config.chunk.first, *eng.config.chunk.ramp,
                                              eng.config.chunk.steady)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the CPU CI has none)")
def test_real_flashinfer_at_head_dim_128_primes_captures_and_replans():
    fi = A.load_flashinfer()
    if fi is None:
        pytest.skip("flashinfer is not installed")
    kw = dict(num_qo_heads=16, num_kv_heads=8, head_dim=128, page_size=16, max_pages_per_row=8,
              scratch_page=63, device="cuda", dtype=torch.bfloat16)
    lane = A.LaneAttention("lm", backend="flashinfer", **kw)
    attn, ref = lane[4], A.TorchPagedDecode(4, **kw)
    kv = torch.randn(64, 2, 16, 8, 128, device="cuda", dtype=torch.bfloat16)
    q = torch.randn(4, 16, 128, device="cuda", dtype=torch.bfloat16)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        attn.prime()
        for _ in range(2):
            attn.run(q, kv)
    stream.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream):
        out = attn.run(q, kv)
    tables, lens = [[1, 2, 3], [4], [5, 6]], [40, 9, 20]
    with torch.cuda.stream(stream):
        attn.plan(tables, lens)
        ref.plan(tables, lens)
        g.replay()
        want = ref.run(q, kv)
    stream.synchronize()
    torch.testing.assert_close(out[:3].float(), want[:3].float(), atol=2e-2, rtol=2e-2)


def test_prepared_ahead_steps_equal_eager_decode_as_rows_leave_and_reorder(cv):
    # prepare_next runs while the device computes a step; the next load uses it only for exactly the
    # same rows one step on. Rows finishing (a different batch) and a reordered batch must not use it,
    # and every path must draw each request's uniforms in its own order: graphed == eager throughout.
    reqs_rows = _rows(cv, 3, 0)
    eager, graphed = reqs_rows, _rows(cv, 3, PAGES // 2)
    cv.prefill(eager)
    cv.prefill(graphed)
    stages = {b: GS.DecodeGraphStage(cv, b, torch.device("cpu")) for b in (2, 4)}
    step = 0
    while eager:
        if step == 2:  # a reordered batch: the prepared inputs must be ignored
            eager, graphed = eager[::-1], graphed[::-1]
        gs = stages[2 if len(graphed) <= 2 else 4]
        want = cv.decode(eager)
        gs.load(graphed)
        out = gs.run()
        gs.prepare_next(graphed)  # what the executor does right after the replay
        got = gs.finish(graphed, {k: v.clone() for k, v in out.items()})
        for w, g in zip(want, got, strict=True):
            np.testing.assert_array_equal(w.frame, g.frame)
        eager = [r for r, o in zip(eager, want, strict=True) if not o.done]
        graphed = [r for r, o in zip(graphed, got, strict=True) if not o.done]
        step += 1
    hits = sum(s.prepared_hits for s in stages.values())
    assert step >= 6 and 0 < hits < step  # used on unchanged batches only


def test_the_executor_prepares_the_next_step_while_this_one_runs():
    from support.cuda_fakes import FakeOps, FakeProgram, R, fake_lane_streams

    from voxcli.engine.executors.cuda import GraphStage

    ops = FakeOps(hold=True)
    calls = []

    class Prog(FakeProgram):
        def graph_stage(self, stage, bucket, lane, device):  # noqa: ANN001, ANN202
            gs = super().graph_stage(stage, bucket, lane, device)
            return GraphStage(run=gs.run, load=gs.load, finish=gs.finish, accepts=gs.accepts,
                              prepare_next=lambda rows: calls.append((stage, len(rows), len(ops.pending))))

    cfg = EngineConfig(policy="full", decode_buckets=(1, 2, 4), background_buckets=(1, 4),
                       urgent_buckets=(1,))
    ex = CudaExecutor(Prog(True, ops), cfg, streams=fake_lane_streams(), ops=ops)
    try:
        ex.launch(Work("lm", "decode", [R(1.0), R(2.0)], bucket=2))
        assert calls == [("decode", 2, 1)]  # after the replay was enqueued, before it completed
        ops.release()
        (done,) = ex.wait(None)
        assert done.result == [2.0, 4.0]
    finally:
        ex.close()
