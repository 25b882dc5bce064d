"""Paged-KV decode attention for graphed decode steps: FlashInfer when present, torch SDPA otherwise.

One object per (lane, batch bucket): a CUDA graph is captured for a fixed batch size, and FlashInfer's
graph-safe decode wrapper (`use_cuda_graph=True`) also fixes its batch size for life. The split of work:

    plan(page_tables, kv_lens)   host, OUTSIDE graph capture, on the lane's stream, before every replay:
                                 writes the batch's page indices into this object's static device
                                 buffers (from pinned CPU int32 staging, non-blocking)
    append(k, v, kv_cache)       inside the graph: write this step's K/V at position kv_len-1
    run(q, kv_cache)             inside the graph: attention of q [bucket, Hq, D] over each row's pages

KV layout (shared by both backends, FlashInfer's "NHD"): `kv_cache[num_pages, 2, page_size, Hkv, D]`,
index 0 = K, 1 = V. Rows beyond the real batch (bucket padding) point at `scratch_page`, a page the KV
pool never hands out, with length 1, so padded rows neither read garbage lengths nor write real pages.

Invariant the executor guarantees: `plan` for step t+1 runs only after step t's replay finished (a
lane has one batch in flight), so the single pinned staging buffer is never overwritten while a
non-blocking copy from it may still be pending.

`flashinfer` is imported lazily inside `load_flashinfer()` under try/except: importing it has crashed
on CPU-only machines in released versions, and a CPU install must never import it.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from types import ModuleType
from typing import Any, Literal

import torch
import torch.nn.functional as F

log = logging.getLogger("voxcli.attention")

Backend = Literal["auto", "flashinfer", "torch"]
_flashinfer: ModuleType | None = None
_flashinfer_error: str | None = None

FLASHINFER_WORKSPACE_BYTES = 128 << 20  # FlashInfer's recommended float workspace; one per LANE


def load_flashinfer() -> ModuleType | None:
    """Import flashinfer once; None (with the reason logged once) when it is absent or broken."""
    global _flashinfer, _flashinfer_error
    if _flashinfer is not None or _flashinfer_error is not None:
        return _flashinfer
    try:
        import flashinfer  # noqa: PLC0415 - lazy on purpose

        _flashinfer = flashinfer
    except Exception as e:  # ImportError, or a crash inside flashinfer's module-level code
        _flashinfer_error = f"{type(e).__name__}: {e}"
        log.warning("voxcli: flashinfer unavailable (%s); decode attention uses torch SDPA over the "
                    "paged KV cache", _flashinfer_error)
    return _flashinfer


def _pinned(shape: int, device: torch.device, dtype: torch.dtype = torch.int32) -> torch.Tensor:
    t = torch.zeros(shape, dtype=dtype)
    # Pinned host memory makes the H2D copy truly asynchronous; it needs CUDA, so only then.
    return t.pin_memory() if device.type == "cuda" else t


class PagedDecodeAttention(ABC):
    """Fixed-batch decode attention over the paged KV layout described in the module docstring."""

    backend: str = "?"

    def __init__(self, bucket: int, *, num_qo_heads: int, num_kv_heads: int, head_dim: int, page_size: int,
                 max_pages_per_row: int, scratch_page: int, device: torch.device | str,
                 dtype: torch.dtype = torch.bfloat16) -> None:
        if num_qo_heads % num_kv_heads:
            raise ValueError(f"query heads ({num_qo_heads}) must be a multiple of KV heads ({num_kv_heads})")
        self.bucket = bucket
        self.num_qo_heads, self.num_kv_heads, self.head_dim = num_qo_heads, num_kv_heads, head_dim
        self.page_size, self.max_pages = page_size, max_pages_per_row
        self.scratch_page = scratch_page
        self.device, self.dtype = torch.device(device), dtype
        # Where this step's K/V go: static so the append inside the graph reads them by address.
        self.write_page = torch.zeros(bucket, dtype=torch.long, device=self.device)
        self.write_offset = torch.zeros(bucket, dtype=torch.long, device=self.device)
        self._write_host = _pinned(2 * bucket, self.device, torch.long)

    # -- host side ---------------------------------------------------------------------------------
    def _rows(self, page_tables: list[list[int]], kv_lens: list[int]) -> tuple[list[list[int]], list[int]]:
        if len(page_tables) != len(kv_lens):
            raise ValueError(f"{len(page_tables)} page tables but {len(kv_lens)} lengths")
        if len(page_tables) > self.bucket:
            raise ValueError(f"batch of {len(page_tables)} rows does not fit bucket {self.bucket}")
        tables, lens = [], []
        for pages, n in zip(page_tables, kv_lens, strict=True):
            need = -(-n // self.page_size)
            if n < 1 or need > len(pages) or need > self.max_pages:
                raise ValueError(f"a row of {n} KV positions needs {need} pages of {self.page_size}; it has "
                                 f"{len(pages)} (at most {self.max_pages} per row in this bucket)")
            tables.append(list(pages[:need]))
            lens.append(n)
        pad = self.bucket - len(tables)
        return tables + [[self.scratch_page]] * pad, lens + [1] * pad

    def plan(self, page_tables: list[list[int]], kv_lens: list[int]) -> None:
        """Stage a batch: row i has `kv_lens[i]` positions (including the one `append` writes this step)
        in `page_tables[i]`. Call outside capture, on the lane's current stream."""
        tables, lens = self._rows(page_tables, kv_lens)
        w = self._write_host
        for i, (pages, n) in enumerate(zip(tables, lens, strict=True)):
            w[i] = pages[(n - 1) // self.page_size]
            w[self.bucket + i] = (n - 1) % self.page_size
        self.write_page.copy_(w[:self.bucket], non_blocking=True)
        self.write_offset.copy_(w[self.bucket:], non_blocking=True)
        self._plan(tables, lens)

    @abstractmethod
    def _plan(self, tables: list[list[int]], lens: list[int]) -> None: ...

    # -- device side (graph-capturable) --------------------------------------------------------------
    def append(self, k: torch.Tensor, v: torch.Tensor, kv_cache: torch.Tensor) -> None:
        """Write k, v [bucket, Hkv, D] at each row's newest position. A plain indexed store."""
        kv_cache[self.write_page, 0, self.write_offset] = k.to(kv_cache.dtype)
        kv_cache[self.write_page, 1, self.write_offset] = v.to(kv_cache.dtype)

    @abstractmethod
    def run(self, q: torch.Tensor, kv_cache: torch.Tensor) -> torch.Tensor:
        """q [bucket, Hq, D] -> [bucket, Hq, D]."""


class TorchPagedDecode(PagedDecodeAttention):
    """SDPA over the same paged layout: gather each row's pages through a padded page table, mask
    positions past its length. Fixed shapes ([bucket, max_pages]) so it captures into a graph."""

    backend = "torch"

    def __init__(self, bucket: int, **kw: Any) -> None:
        super().__init__(bucket, **kw)
        self.page_table = torch.zeros(bucket, self.max_pages, dtype=torch.long, device=self.device)
        self.kv_len = torch.ones(bucket, dtype=torch.long, device=self.device)
        self.positions = torch.arange(self.max_pages * self.page_size, device=self.device)
        self._host = _pinned(bucket * (self.max_pages + 1), self.device, torch.long)

    def _plan(self, tables: list[list[int]], lens: list[int]) -> None:
        h = self._host
        h.fill_(self.scratch_page)
        grid = h[:self.bucket * self.max_pages].view(self.bucket, self.max_pages)
        for i, pages in enumerate(tables):
            grid[i, :len(pages)] = torch.tensor(pages, dtype=torch.long)
        h[self.bucket * self.max_pages:] = torch.tensor(lens, dtype=torch.long)
        self.page_table.copy_(grid, non_blocking=True)
        self.kv_len.copy_(h[self.bucket * self.max_pages:], non_blocking=True)

    def run(self, q: torch.Tensor, kv_cache: torch.Tensor) -> torch.Tensor:
        b, L = self.bucket, self.max_pages * self.page_size
        pages = kv_cache[self.page_table]  # [b, P, 2, page, Hkv, D]
        k = pages[:, :, 0].reshape(b, L, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = pages[:, :, 1].reshape(b, L, self.num_kv_heads, self.head_dim).transpose(1, 2)
        mask = (self.positions[None, :] < self.kv_len[:, None])[:, None, None, :]  # [b, 1, 1, L]
        out = F.scaled_dot_product_attention(q.unsqueeze(2).to(k.dtype), k, v, attn_mask=mask,
                                             enable_gqa=self.num_qo_heads != self.num_kv_heads)
        return out.squeeze(2).to(q.dtype)


class FlashInferPagedDecode(PagedDecodeAttention):
    """FlashInfer's BatchDecodeWithPagedKVCacheWrapper in CUDA-graph mode for this bucket.

    The wrapper binds our static index buffers (sized for the bucket's worst case) and copies into them
    in `plan()`; `run()` reads them by address inside the graph. `workspace` is the lane's 128 MB float
    buffer: wrappers of one lane may share it (their replays are in order), lanes must not."""

    backend = "flashinfer"

    def __init__(self, bucket: int, *, workspace: torch.Tensor, flashinfer: ModuleType, **kw: Any) -> None:
        super().__init__(bucket, **kw)
        b, p, dev = self.bucket, self.max_pages, self.device
        self.indptr_buf = torch.zeros(b + 1, dtype=torch.int32, device=dev)
        self.indices_buf = torch.zeros(b * p, dtype=torch.int32, device=dev)
        self.last_len_buf = torch.zeros(b, dtype=torch.int32, device=dev)
        self._indptr_h, self._indices_h = _pinned(b + 1, dev), _pinned(b * p, dev)
        self._last_h = _pinned(b, dev)
        group = self.num_qo_heads // self.num_kv_heads
        self.wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
            workspace, kv_layout="NHD", use_cuda_graph=True, use_tensor_cores=group >= 4,
            paged_kv_indptr_buffer=self.indptr_buf, paged_kv_indices_buffer=self.indices_buf,
            paged_kv_last_page_len_buffer=self.last_len_buf)

    def _plan(self, tables: list[list[int]], lens: list[int]) -> None:
        n = 0
        self._indptr_h[0] = 0
        for i, (pages, length) in enumerate(zip(tables, lens, strict=True)):
            self._indices_h[n:n + len(pages)] = torch.tensor(pages, dtype=torch.int32)
            n += len(pages)
            self._indptr_h[i + 1] = n
            self._last_h[i] = (length - 1) % self.page_size + 1
        # plan() must see CPU tensors (it reads indptr on the host) and explicit bf16: its default
        # q_data_type is float16.
        self.wrapper.plan(self._indptr_h, self._indices_h[:n], self._last_h, self.num_qo_heads,
                          self.num_kv_heads, self.head_dim, self.page_size, pos_encoding_mode="NONE",
                          q_data_type=self.dtype, kv_data_type=self.dtype, non_blocking=True)

    def run(self, q: torch.Tensor, kv_cache: torch.Tensor) -> torch.Tensor:
        return self.wrapper.run(q, kv_cache)


def make_decode_attention(bucket: int, *, backend: Backend = "auto", workspace: torch.Tensor | None = None,
                          **kw: Any) -> PagedDecodeAttention:
    """The decode attention for one (lane, bucket). `auto` = FlashInfer on CUDA when importable, else
    torch SDPA. `flashinfer` insists (raises with the import error when it is absent)."""
    device = torch.device(kw["device"])
    if backend == "torch" or (backend == "auto" and device.type != "cuda"):
        return TorchPagedDecode(bucket, **kw)
    fi = load_flashinfer()
    if fi is None:
        if backend == "flashinfer":
            raise RuntimeError(f"flashinfer was requested but cannot be imported ({_flashinfer_error}); "
                               "install the gpu extra or use the torch attention backend")
        return TorchPagedDecode(bucket, **kw)
    if workspace is None:
        workspace = torch.empty(FLASHINFER_WORKSPACE_BYTES, dtype=torch.uint8, device=device)
    return FlashInferPagedDecode(bucket, workspace=workspace, flashinfer=fi, **kw)


class LaneAttention:
    """All decode-attention objects of one lane, one per bucket, sharing the lane's workspace."""

    def __init__(self, lane: str, buckets: tuple[int, ...], *, backend: Backend = "auto", **kw: Any) -> None:
        self.lane = lane
        device = torch.device(kw["device"])
        use_fi = backend != "torch" and device.type == "cuda" and load_flashinfer() is not None
        ws = torch.empty(FLASHINFER_WORKSPACE_BYTES, dtype=torch.uint8, device=device) if use_fi else None
        self.by_bucket = {b: make_decode_attention(b, backend=backend, workspace=ws, **kw) for b in buckets}

    def __getitem__(self, bucket: int) -> PagedDecodeAttention:
        return self.by_bucket[bucket]
