"""Paged-KV decode attention for graphed decode steps: FlashInfer when present, torch SDPA otherwise.

One object per (lane, batch bucket): a CUDA graph is captured for a fixed batch size, and FlashInfer's
graph-safe decode wrapper (`use_cuda_graph=True`) also fixes its batch size for life. The buckets of one
lane share one FlashInfer workspace (`LaneAttention`): a lane replays one graph at a time, lanes run
concurrently and must not share one. The split of work:

    plan(page_tables, kv_lens)   host, OUTSIDE graph capture, on the lane's stream, before every replay
                                 (and once before warm-up and capture: `prime()`): writes the batch's
                                 page indices into this object's static device buffers
    append(k, v, kv_cache)       inside the graph: write this step's K/V at position kv_len-1
    run(q, kv_cache)             inside the graph: attention of q [bucket, Hq, D] over each row's pages

No synchronous copy in `plan`: the host arrays are built with numpy (no per-row torch calls) into
pinned staging buffers and go to the device with non-blocking copies on the lane's stream. FlashInfer's
own `plan()` reads `indptr` and `last_page_len` on the host (pinned here, non-blocking copies into its
bound buffers) but copies `indices` synchronously when they are on the host, so this module stages
them on the device first and hands FlashInfer the device copy.

KV layout (shared by both backends, FlashInfer's "NHD"): `kv_cache[num_pages, 2, page_size, Hkv, D]`,
index 0 = K, 1 = V. Rows beyond the real batch (bucket padding) point at `scratch_page`, a page the KV
pool never hands out, with length 1, so padded rows neither read garbage lengths nor write real pages.
`max_pages_per_row` is the ENGINE's per-row bound (longest prompt + frame cap, `ResourceLimits`), not
the model's context: the torch fallback gathers that many pages per row every step.

Invariant the executor guarantees: `plan` for step t+1 runs only after step t's replay finished (a
lane has one batch in flight), so the pinned staging buffers are never overwritten while a
non-blocking copy from them may still be pending.

`flashinfer` is imported lazily inside `load_flashinfer()` under try/except: importing it has crashed
on CPU-only machines in released versions, and a CPU install must never import it.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from itertools import chain
from types import ModuleType
from typing import Any, Literal

import numpy as np
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
        self._write_np = self._write_host.numpy()
        self.planned = False

    # -- host side ---------------------------------------------------------------------------------
    def _rows(self, page_tables: list[list[int]] | list[np.ndarray],
              kv_lens: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The padded batch as flat arrays: (pages [total] int64, indptr [bucket+1], lens [bucket]), each
        row's first ceil(len / page_size) pages, padding rows one scratch page of length 1."""
        n = len(page_tables)
        if n != len(kv_lens):
            raise ValueError(f"{n} page tables but {len(kv_lens)} lengths")
        if n > self.bucket:
            raise ValueError(f"batch of {n} rows does not fit bucket {self.bucket}")
        lens = np.ones(self.bucket, dtype=np.int64)
        lens[:n] = kv_lens
        need = -(-lens // self.page_size)
        have = np.fromiter((len(p) for p in page_tables), dtype=np.int64, count=n)
        bad = (lens[:n] < 1) | (need[:n] > have) | (need[:n] > self.max_pages)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"a row of {int(lens[i])} KV positions needs {int(need[i])} pages of "
                             f"{self.page_size}; it has {int(have[i])} (at most {self.max_pages} per row "
                             "in this bucket)")
        need[n:] = 1
        indptr = np.zeros(self.bucket + 1, dtype=np.int64)
        np.cumsum(need, out=indptr[1:])
        total = int(indptr[-1])
        pages = np.full(total, self.scratch_page, dtype=np.int64)
        real = int(indptr[n])
        firsts = [p[:k] for p, k in zip(page_tables, need[:n].tolist(), strict=True)]
        if n and all(isinstance(p, np.ndarray) for p in page_tables):
            pages[:real] = np.concatenate(firsts)
        else:
            pages[:real] = np.fromiter(chain.from_iterable(firsts), dtype=np.int64, count=real)
        return pages, indptr, lens

    def plan(self, page_tables: list[list[int]] | list[np.ndarray], kv_lens: list[int]) -> None:
        """Stage a batch (page tables as lists or int64 arrays): row i has `kv_lens[i]` positions
        (including the one `append` writes this step) in `page_tables[i]`. Call outside capture, on the
        lane's current stream."""
        self.stage(*self._rows(page_tables, kv_lens))

    def compute(self, page_tables: list[list[int]] | list[np.ndarray],
                kv_lens: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The host half of `plan` (validation and the flat arrays), touching no buffer: it may run
        ahead, while the previous step still reads this object's buffers on the device."""
        return self._rows(page_tables, kv_lens)

    def stage(self, pages: np.ndarray, indptr: np.ndarray, lens: np.ndarray) -> None:
        """The rest of `plan`: fill the pinned staging from `compute`'s arrays and copy (non-blocking)."""
        w = self._write_np
        w[:self.bucket] = pages[indptr[1:] - 1]  # the page holding position len-1 is each row's last
        w[self.bucket:] = (lens - 1) % self.page_size
        self.write_page.copy_(self._write_host[:self.bucket], non_blocking=True)
        self.write_offset.copy_(self._write_host[self.bucket:], non_blocking=True)
        self._plan(pages, indptr, lens)
        self.planned = True

    def prime(self) -> None:
        """Plan an all-padding batch (every row on the scratch page, length 1): warm-up runs and the
        capture read planned buffers (FlashInfer sets its kernel configuration in plan) and write only
        the scratch page."""
        self.plan([], [])

    @abstractmethod
    def _plan(self, pages: np.ndarray, indptr: np.ndarray, lens: np.ndarray) -> None: ...

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
        self._grid_np = self._host[:bucket * self.max_pages].numpy().reshape(bucket, self.max_pages)
        self._len_np = self._host[bucket * self.max_pages:].numpy()

    def _plan(self, pages: np.ndarray, indptr: np.ndarray, lens: np.ndarray) -> None:
        grid = self._grid_np
        grid.fill(self.scratch_page)
        counts = np.diff(indptr)
        rows = np.repeat(np.arange(self.bucket), counts)
        cols = np.arange(pages.size) - np.repeat(indptr[:-1], counts)
        grid[rows, cols] = pages
        self._len_np[:] = lens
        b, p = self.bucket, self.max_pages
        self.page_table.copy_(self._host[:b * p].view(b, p), non_blocking=True)
        self.kv_len.copy_(self._host[b * p:], non_blocking=True)

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
        self.workspace = workspace
        self.indptr_buf = torch.zeros(b + 1, dtype=torch.int32, device=dev)
        self.indices_buf = torch.zeros(b * p, dtype=torch.int32, device=dev)
        self.last_len_buf = torch.zeros(b, dtype=torch.int32, device=dev)
        # The indices travel host -> device here (non-blocking, pinned); FlashInfer then copies them
        # device -> device into indices_buf. Handing it host indices would make that copy synchronous.
        self.indices_stage = torch.zeros(b * p, dtype=torch.int32, device=dev)
        self._indptr_h, self._indices_h = _pinned(b + 1, dev), _pinned(b * p, dev)
        self._last_h = _pinned(b, dev)
        group = self.num_qo_heads // self.num_kv_heads
        self.wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
            workspace, kv_layout="NHD", use_cuda_graph=True, use_tensor_cores=group >= 4,
            paged_kv_indptr_buffer=self.indptr_buf, paged_kv_indices_buffer=self.indices_buf,
            paged_kv_last_page_len_buffer=self.last_len_buf)

    def _plan(self, pages: np.ndarray, indptr: np.ndarray, lens: np.ndarray) -> None:
        n = pages.size
        self._indptr_h.numpy()[:] = indptr
        self._indices_h.numpy()[:n] = pages
        self._last_h.numpy()[:] = (lens - 1) % self.page_size + 1
        self.indices_stage[:n].copy_(self._indices_h[:n], non_blocking=True)
        # plan() reads indptr on the host (pinned: no sync) and needs explicit bf16: its default
        # q_data_type is float16.
        self.wrapper.plan(self._indptr_h, self.indices_stage[:n], self._last_h, self.num_qo_heads,
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
    """All decode-attention objects of one lane, one per bucket, built on first use and sharing ONE
    FlashInfer workspace (a lane replays one graph at a time; 128 MiB per lane, not per bucket)."""

    def __init__(self, lane: str, *, backend: Backend = "auto", **kw: Any) -> None:
        self.lane, self.backend, self.kw = lane, backend, kw
        self.by_bucket: dict[int, PagedDecodeAttention] = {}
        self.workspace: torch.Tensor | None = None

    def __getitem__(self, bucket: int) -> PagedDecodeAttention:
        attn = self.by_bucket.get(bucket)
        if attn is None:
            device = torch.device(self.kw["device"])
            use_fi = (self.backend == "flashinfer"
                      or (self.backend == "auto" and device.type == "cuda" and load_flashinfer() is not None))
            if use_fi and self.workspace is None:
                self.workspace = torch.empty(FLASHINFER_WORKSPACE_BYTES, dtype=torch.uint8, device=device)
            attn = make_decode_attention(bucket, backend=self.backend, workspace=self.workspace, **self.kw)
            self.by_bucket[bucket] = attn
        return attn
