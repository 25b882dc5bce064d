"""Paged-KV decode attention: torch SDPA path against a dense reference, the FlashInfer wrapper's
contract (with a fake flashinfer module), and the CUDA-graph replay after a re-plan (GPU only)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from voxcli.models import paged_attention as A

HQ, HKV, D, PAGE = 4, 2, 8, 4


def _kw(bucket_pages=5, device="cpu", dtype=torch.float32):
    return dict(
        num_qo_heads=HQ,
        num_kv_heads=HKV,
        head_dim=D,
        page_size=PAGE,
        max_pages_per_row=bucket_pages,
        scratch_page=31,
        device=device,
        dtype=dtype,
    )


def _reference(q, keys, values):
    """Dense attention for one row: q [Hq, D], keys/values [L, Hkv, D]."""
    rep = HQ // HKV
    k = keys.repeat_interleave(rep, dim=1).transpose(0, 1)  # [Hq, L, D]
    v = values.repeat_interleave(rep, dim=1).transpose(0, 1)
    w = torch.softmax((q[:, None, :] * k).sum(-1) / math.sqrt(D), dim=-1)
    return (w[..., None] * v).sum(1)


def _fill(kv, pages, keys, values):
    for pos in range(keys.shape[0]):
        kv[pages[pos // PAGE], 0, pos % PAGE] = keys[pos]
        kv[pages[pos // PAGE], 1, pos % PAGE] = values[pos]


def test_torch_paged_decode_matches_dense_attention_with_append_and_padding():
    g = torch.Generator().manual_seed(0)
    kv = torch.randn(32, 2, PAGE, HKV, D, generator=g)
    lens = [7, 1, 13]  # positions AFTER this step's append
    perm = torch.randperm(30, generator=g).tolist()  # scattered, non-contiguous pages
    tables = [perm[0:2], perm[2:3], perm[3:7]]
    keys = [torch.randn(n, HKV, D, generator=g) for n in lens]
    values = [torch.randn(n, HKV, D, generator=g) for n in lens]
    for t, k, v in zip(tables, keys, values, strict=True):
        _fill(kv, t, k[:-1], v[:-1])  # history already in the cache
    attn = A.TorchPagedDecode(4, **_kw())
    attn.plan(tables, lens)
    new_k = torch.zeros(4, HKV, D)
    new_v = torch.zeros(4, HKV, D)
    for i in range(3):
        new_k[i], new_v[i] = keys[i][-1], values[i][-1]
    scratch_before = kv[31].clone()
    attn.append(new_k, new_v, kv)
    q = torch.randn(4, HQ, D, generator=g)
    out = attn.run(q, kv)
    for i in range(3):
        torch.testing.assert_close(out[i], _reference(q[i], keys[i], values[i]), atol=1e-5, rtol=1e-5)
    assert torch.isfinite(out[3]).all()  # the padded row reads the scratch page, never NaN
    assert 31 not in [p for t in tables for p in t]
    assert torch.equal(kv[31, 0, 0], torch.zeros(HKV, D))  # the padded row's append went to scratch
    assert not torch.equal(kv[31], scratch_before)


def test_replanning_the_same_object_changes_only_the_static_buffers():
    attn = A.TorchPagedDecode(2, **_kw())
    table_ptr = attn.page_table.data_ptr()
    attn.plan([[1, 2]], [5])
    first = attn.page_table.clone()
    attn.plan([[3], [4, 5, 6]], [2, 9])
    assert attn.page_table.data_ptr() == table_ptr  # graph-safe: same address, new content
    assert not torch.equal(first, attn.page_table)
    assert attn.kv_len.tolist() == [2, 9]
    assert attn.write_page.tolist() == [3, 6] and attn.write_offset.tolist() == [1, 0]


@pytest.mark.parametrize(
    ("tables", "lens", "match"),
    [
        ([[1]], [5], "needs 2 pages"),
        ([[1], [2], [3]], [1, 1, 1], "does not fit bucket 2"),
        ([[1]], [0], "needs 0 pages"),
        ([[1, 2, 3, 4, 5, 6]], [24], "at most 5"),
    ],
)
def test_plan_rejects_batches_that_do_not_fit(tables, lens, match):
    with pytest.raises(ValueError, match=match):
        A.TorchPagedDecode(2, **_kw()).plan(tables, lens)


def test_auto_backend_on_cpu_is_torch_and_never_imports_flashinfer(monkeypatch):
    monkeypatch.setattr(A, "load_flashinfer", lambda: pytest.fail("flashinfer must not be imported for CPU"))
    assert A.make_decode_attention(2, **_kw()).backend == "torch"
    lane = A.LaneAttention("lm", (1, 2, 4), **_kw())
    assert [lane[b].bucket for b in (1, 2, 4)] == [1, 2, 4]


class _FakeWrapper:
    def __init__(self, workspace, kv_layout, **kw):
        self.init = dict(kv_layout=kv_layout, **kw)
        self.plans = []

    def plan(self, indptr, indices, last_page_len, *args, **kw):
        self.plans.append(
            (
                indptr.clone(),
                indices.clone(),
                last_page_len.clone(),
                args,
                kw,
                indptr.device.type,
                indptr.dtype,
            )
        )

    def run(self, q, kv):
        return q


def test_flashinfer_wrapper_is_graph_mode_with_static_buffers_and_explicit_bf16():
    fake = SimpleNamespace(BatchDecodeWithPagedKVCacheWrapper=_FakeWrapper)
    ws = torch.empty(16, dtype=torch.uint8)
    attn = A.FlashInferPagedDecode(4, workspace=ws, flashinfer=fake, **_kw(dtype=torch.bfloat16))
    init = attn.wrapper.init
    assert init["kv_layout"] == "NHD" and init["use_cuda_graph"] is True
    assert (
        init["paged_kv_indptr_buffer"] is attn.indptr_buf
        and init["paged_kv_indices_buffer"] is attn.indices_buf
    )
    assert init["paged_kv_last_page_len_buffer"] is attn.last_len_buf
    assert attn.indices_buf.numel() == 4 * 5 and attn.indptr_buf.dtype == torch.int32
    attn.plan([[3, 4], [9]], [6, 4])
    indptr, indices, last, args, kw, dev, dtype = attn.wrapper.plans[-1]
    assert dev == "cpu" and dtype == torch.int32  # host index tensors: no device->host sync in plan
    assert indptr.tolist() == [0, 2, 3, 4, 5] and indices.tolist() == [3, 4, 9, 31, 31]
    assert last.tolist() == [2, 4, 1, 1]
    assert args == (HQ, HKV, D, PAGE)
    assert kw["q_data_type"] is torch.bfloat16 and kw["kv_data_type"] is torch.bfloat16
    assert kw["non_blocking"] is True


def test_flashinfer_required_but_absent_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(A, "load_flashinfer", lambda: None)
    with pytest.raises(RuntimeError, match="flashinfer was requested"):
        A.make_decode_attention(1, backend="flashinfer", **_kw(device="cuda"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (the CPU CI has none)")
@pytest.mark.parametrize("backend", ["torch", "auto"])
def test_graph_replay_after_replan_matches_eager(backend):
    dev = "cuda"
    kv = torch.randn(32, 2, PAGE, HKV, D, device=dev, dtype=torch.bfloat16)
    attn = A.make_decode_attention(2, backend=backend, **_kw(device=dev, dtype=torch.bfloat16))
    q = torch.randn(2, HQ, D, device=dev, dtype=torch.bfloat16)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        attn.plan([[1, 2], [3]], [6, 3])
        for _ in range(2):
            attn.run(q, kv)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            out = attn.run(q, kv)
        attn.plan([[5], [6, 7, 8]], [2, 10])
        g.replay()
        graphed = out.clone()
        eager = attn.run(q, kv)
    stream.synchronize()
    torch.testing.assert_close(graphed, eager, atol=2e-2, rtol=2e-2)
