"""The Qwen3-TTS program's graph stages (models/qwen3_tts/graph_stages.py) run eagerly on the CPU:
load -> run -> finish over padded static buffers must equal the program's own decode / codec exactly,
run() must not sync with the host, and the cuda executor must pick the stages up per bucket."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
from voxcli.models.base import CodecItem, Row, SamplingParams, SynthesisRequest
from voxcli.models.qwen3_tts.program import Qwen3TTSProgram

from voxcli.config import EngineConfig
from voxcli.engine.executors.base import Work
from voxcli.engine.executors.cuda import CudaExecutor, graph_keys
from voxcli.engine.partitions import LaneStreams

PAGE = 4
PAGES = 96
TEXTS = ["Hello world. This is a tiny test.", "Speak slowly.", "The quick brown fox jumps over the dog."]


@pytest.fixture(scope="module")
def cv(tiny_custom_voice) -> Qwen3TTSProgram:
    p = Qwen3TTSProgram.load(str(tiny_custom_voice))
    p.init_kv(PAGES, PAGE)
    p.init_codec_slots(8)
    return p


def _requests(n: int, sampled: bool) -> list[SynthesisRequest]:
    out = []
    for i in range(n):
        # Row 0 may stop on EOS; the others run a fixed number of frames (bench rows: EOS masked).
        # A sampled batch keeps one greedy row (i == 2): per-row settings in one batch.
        sp = SamplingParams(greedy=not sampled or i == 2)
        out.append(SynthesisRequest(text=TEXTS[i % 3], voice="serena", seed=11 + i, sampling=sp,
                                    max_frames=7 if i == 0 else None, fixed_frames=None if i == 0 else 3 + i))
    return out


def _rows(cv: Qwen3TTSProgram, reqs: list[SynthesisRequest], first_page: int) -> list[Row]:
    rows, page = [], first_page
    for i, r in enumerate(reqs):
        prompt = cv.prepare(r)
        need = -(-cv.kv_tokens(prompt) // PAGE)
        rows.append(Row(request_id=i, prompt=prompt, pages=list(range(page, page + need))))
        page += need
    assert page <= PAGES, "test pool too small"
    return rows


def _host(outputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """What the executor does: copy the device outputs into host mirrors before finish()."""
    return {k: v.clone() for k, v in outputs.items()}


@pytest.mark.parametrize(("bucket", "n_rows", "sampled"),
                         [(1, 1, False), (2, 1, True), (4, 3, True), (4, 2, False)])
def test_graphed_decode_equals_eager_decode(cv, bucket, n_rows, sampled):
    reqs = _requests(n_rows, sampled)
    eager, graphed = _rows(cv, reqs, 0), _rows(cv, reqs, PAGES // 2)
    cv.prefill(eager)
    cv.prefill(graphed)
    gs = cv.graph_stage("decode", bucket, "lm", torch.device("cpu"))
    steps = 0
    while eager:
        want = cv.decode(eager)
        gs.load(graphed)
        got = gs.finish(graphed, _host(gs.run()))
        for w, g in zip(want, got, strict=True):
            np.testing.assert_array_equal(w.frame, g.frame)
            assert w.done == g.done
        assert [r.kv_len for r in eager] == [r.kv_len for r in graphed]
        eager = [r for r, o in zip(eager, want, strict=True) if not o.done]
        graphed = [r for r, o in zip(graphed, got, strict=True) if not o.done]
        steps += 1
    assert steps >= 4  # every row ran several graphed steps (and rows left the batch along the way)


def test_graphed_decode_stops_on_eos_and_masks_it_for_bench_rows(cv):
    """The calibrated greedy request of test_qwen_program stops on EOS after 24 frames; a fixed-frames
    copy must run past it. Both in one padded bucket, graphed and eager in lockstep."""
    def req(**kw):
        return SynthesisRequest(text=TEXTS[0], voice="serena", language="english",
                                options={"streaming_text": True}, sampling=SamplingParams(greedy=True), **kw)

    reqs = [req(max_frames=30), req(fixed_frames=26)]
    eager, graphed = _rows(cv, reqs, 0), _rows(cv, reqs, PAGES // 2)
    cv.prefill(eager)
    cv.prefill(graphed)
    gs = cv.graph_stage("decode", 4, "lm", torch.device("cpu"))
    lengths = {0: 0, 1: 0}
    while eager:
        want = cv.decode(eager)
        gs.load(graphed)
        got = gs.finish(graphed, _host(gs.run()))
        for r, w, g in zip(graphed, want, got, strict=True):
            np.testing.assert_array_equal(w.frame, g.frame)
            assert w.done == g.done
            lengths[r.request_id] += 1
        eager = [r for r, o in zip(eager, want, strict=True) if not o.done]
        graphed = [r for r, o in zip(graphed, got, strict=True) if not o.done]
    assert lengths == {0: 24, 1: 26}


def _chunks(cv: Qwen3TTSProgram, lengths: list[int], seed: int) -> list[np.ndarray]:
    g = np.random.default_rng(seed)
    size = cv.codec_model.cfg.codebook_size
    return [g.integers(0, size, (n, 16)).astype(np.int64) for n in lengths]


@pytest.mark.parametrize(("bucket", "lengths"),
                         [(1, [[3], [1]]), (2, [[1], [4]]), (4, [[1, 7, 2], [10, 1, 3]])])
def test_graphed_codec_equals_eager_codec(cv, bucket, lengths):
    gs = cv.graph_stage("codec", bucket, "background", torch.device("cpu"))
    n = len(lengths[0])
    # The two paths share the program's slot table: eager on slots 0.., graphed on slots 4...
    for call, lens in enumerate(lengths):
        chunks = _chunks(cv, lens, seed=call)
        first = call == 0
        want = cv.codec([CodecItem(slot=i, codes=c, first=first, last=False) for i, c in enumerate(chunks)])
        items = [CodecItem(slot=4 + i, codes=c, first=first, last=False) for i, c in enumerate(chunks)]
        gs.load(items)
        got = gs.finish(items, _host(gs.run()))
        assert len(got) == n
        for w, g in zip(want, got, strict=True):
            assert w.shape == g.shape and g.dtype == np.float32
            # Not bit-exact: the graph pads every chunk to limits.max_chunk_frames, the eager pass to the
            # batch's longest chunk, and the matmul shapes change the last bits. The eager decoder moves
            # just as much (1.4e-5 on this checkpoint) when a longer batch-mate changes its padding.
            assert float(np.abs(w - g).max()) <= 5e-5


def test_codec_graph_refuses_too_long_chunks_and_bad_slots(cv):
    gs = cv.graph_stage("codec", 2, "urgent", torch.device("cpu"))
    long = _chunks(cv, [cv.limits.max_chunk_frames + 1], 0)[0]
    too_long = CodecItem(slot=0, codes=long, first=True, last=False)
    fits = CodecItem(slot=1, codes=long[:3], first=True, last=False)
    # the executor asks first and runs such a batch eagerly; load() itself still refuses it
    assert gs.accepts([fits]) and not gs.accepts([fits, too_long])
    with pytest.raises(ValueError, match="max_chunk_frames"):
        gs.load([too_long])
    with pytest.raises(ValueError, match="outside the table"):
        gs.load([CodecItem(slot=cv.scratch_slot, codes=long[:2], first=True, last=False)])
    with pytest.raises(ValueError, match="does not fit"):
        gs.load([CodecItem(slot=i, codes=long[:1], first=True, last=False) for i in range(3)])


@contextlib.contextmanager
def _no_host_sync():
    """Make every tensor -> host path raise, as a CUDA graph capture would refuse it."""
    def refuse(name):
        def f(*a, **k):
            raise AssertionError(f"host sync inside run(): Tensor.{name}")
        return f

    names = ("item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__")
    saved = {n: getattr(torch.Tensor, n) for n in names}
    try:
        for n in names:
            setattr(torch.Tensor, n, refuse(n))
        yield
    finally:
        for n, f in saved.items():
            setattr(torch.Tensor, n, f)


def test_run_has_no_host_sync(cv):
    # Sanity: the guard catches a sync.
    with pytest.raises(AssertionError, match="host sync"), _no_host_sync():
        bool(torch.ones(1).any())
    reqs = _requests(2, sampled=True)
    rows = _rows(cv, reqs, 0)
    cv.prefill(rows)
    dec = cv.graph_stage("decode", 4, "lm", torch.device("cpu"))
    dec.load(rows)
    with _no_host_sync():
        out = dec.run()
    assert set(out) == {"frames", "hid", "nxt", "seen"} and out["frames"].shape == (4, 16)
    cod = cv.graph_stage("codec", 2, "urgent", torch.device("cpu"))
    cod.load([CodecItem(slot=0, codes=_chunks(cv, [2], 1)[0], first=True, last=False)])
    with _no_host_sync():
        out = cod.run()
    assert out["wav"].shape == (2, cv.limits.max_chunk_frames * cv.spec.samples_per_frame)


# ---------------------------------------------------------------- the cuda executor picks them up
class _EagerOps:
    """Device stand-in: 'capture' runs once and 'replay' reruns the function (tests/test_cuda_executor.py
    fakes the device the same way)."""

    device = torch.device("cpu")

    @contextlib.contextmanager
    def on(self, stream):
        yield

    def event(self):
        return object()

    def record(self, event, stream):
        pass

    def done(self, event):
        return True

    def wait_event(self, stream, event):
        pass

    def pool(self):
        return object()

    def capture(self, run, stream, pool):
        return run, run()

    def replay(self, graph):
        graph()

    def host_mirror(self, t):
        return torch.empty_like(t)

    def synchronize(self):
        pass


def test_cuda_executor_captures_the_program_stages_per_bucket(cv):
    streams = LaneStreams(lm="s-lm", codec="s-codec", device="s-device", green=True, total_sms=132, lm_sms=96,
                          codec_sms=32, priorities={"device": -5, "lm": -4, "codec": 0}, prefill="s-prefill")
    cfg = EngineConfig(policy="full", decode_buckets=(1, 2, 4), background_buckets=(2, 4),
                       urgent_buckets=(1, 2))
    ex = CudaExecutor(cv, cfg, streams=streams, ops=_EagerOps())
    try:
        assert set(ex.graphs) == set(graph_keys(cfg)) and not ex.eager_keys
        assert ("backbone", "decode", 4) in ex.graphs and ("device", "codec", 1) in ex.graphs
        # One decode batch through launch -> replay -> host copy -> finish equals the eager decode.
        reqs = _requests(3, sampled=True)
        eager, graphed = _rows(cv, reqs, 0), _rows(cv, reqs, PAGES // 2)
        cv.prefill(eager)
        cv.prefill(graphed)
        ex.launch(Work(lane="lm", stage="decode", rows=graphed, bucket=4))
        (done,) = ex.wait(None)
        assert done.error is None
        for w, g in zip(cv.decode(eager), done.result, strict=True):
            np.testing.assert_array_equal(w.frame, g.frame)
    finally:
        ex.close()


def test_graph_stage_offers_decode_and_codec_only_and_checks_the_device(cv):
    assert cv.graph_stage("prefill", 1, "lm", torch.device("cpu")) is None  # variable length: eager
    with pytest.raises(RuntimeError, match="model lives on cpu"):
        cv.graph_stage("decode", 1, "lm", torch.device("meta"))


def test_a_decode_stage_plans_a_context_without_requests_for_calibration(cv):
    """`GraphStage.plan_context` (gpu_check's calibration): every row of the bucket that deep, on pages of
    its own; a codec stage has no such hook."""
    gs = cv.graph_stage("decode", 2, "calibrate", torch.device("cpu"))
    gs.plan_context(9)  # 10 positions = 3 pages of 4 each
    attn = cv.lane_attention("calibrate", torch.device("cpu"), cv.attention_backend)[2]
    assert attn.kv_len.tolist() == [10, 10]
    assert attn.page_table[:, :3].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert cv.graph_stage("codec", 2, "calibrate", torch.device("cpu")).plan_context is None
