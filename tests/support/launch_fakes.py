"""Stricter device fakes for the CUDA launch path, used on the CPU.

`DeviceLedger` marks which CPU tensors stand for device memory (the stage's static buffers, the KV
pool, ...). `CopyRecorder` (a TorchFunctionMode) records every synchronous host<->device transfer
between marked and unmarked tensors: a `copy_` without non_blocking, an indexed store of a host tensor
into device memory, and any read of device memory on the host (`item`, `tolist`, `numpy`, `cpu`,
`bool`/`int`/`float`). On a GPU each of those blocks the host thread.

`strict_flashinfer(ledger)` is a `flashinfer` module stand-in whose BatchDecodeWithPagedKVCacheWrapper
follows FlashInfer 0.6's documented behaviour where it matters: `run()` before any `plan()` raises (the
real one has no cached dtypes yet), `plan()` reads `indptr` on the host and copies the indices into its
bound buffer with `non_blocking=(indices on the device) and non_blocking` (so host indices are a
synchronous copy), the batch size is fixed for life in CUDA-graph mode, and `run()` computes paged
decode attention from the BOUND buffers (what a replayed graph reads), so results are checked too.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import torch
from torch.overrides import TorchFunctionMode


class DeviceLedger:
    def __init__(self) -> None:
        self._storages: set[int] = set()

    def mark(self, *tensors: Any) -> None:
        for t in tensors:
            if isinstance(t, torch.Tensor):
                self._storages.add(t.untyped_storage().data_ptr())

    def is_device(self, t: Any) -> bool:
        return isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() in self._storages


_HOST_READS = {"item", "tolist", "numpy", "cpu", "__bool__", "__int__", "__float__", "__index__"}


class CopyRecorder(TorchFunctionMode):
    """Records synchronous host<->device transfers (see the module docstring) in `self.syncs`."""

    def __init__(self, ledger: DeviceLedger) -> None:
        super().__init__()
        self.ledger, self.syncs = ledger, []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        dev = self.ledger.is_device
        if name == "copy_" and len(args) >= 2:
            nb = kwargs.get("non_blocking", args[2] if len(args) > 2 else False)
            if dev(args[0]) != dev(args[1]) and not nb:
                self.syncs.append(f"copy_ {'H2D' if dev(args[0]) else 'D2H'} without non_blocking")
        elif name == "__setitem__" and len(args) == 3:
            if dev(args[0]) and isinstance(args[2], torch.Tensor) and not dev(args[2]):
                self.syncs.append("indexed store of a host tensor into device memory")
        elif name in _HOST_READS and args and dev(args[0]):
            self.syncs.append(f"{name}() of device memory")
        elif name == "to" and args and dev(args[0]):
            target = kwargs.get("device", args[1] if len(args) > 1 else None)
            if str(target).startswith("cpu"):
                self.syncs.append("to(cpu) of device memory")
        return func(*args, **kwargs)


class StrictDecodeWrapper:
    instances: list[StrictDecodeWrapper] = []

    def __init__(self, workspace: torch.Tensor, kv_layout: str = "NHD", *, use_cuda_graph: bool = False,
                 use_tensor_cores: bool = False, paged_kv_indptr_buffer: torch.Tensor | None = None,
                 paged_kv_indices_buffer: torch.Tensor | None = None,
                 paged_kv_last_page_len_buffer: torch.Tensor | None = None, ledger: DeviceLedger) -> None:
        if kv_layout != "NHD":
            raise ValueError(f"unexpected layout {kv_layout}")
        if not use_cuda_graph or paged_kv_indptr_buffer is None or paged_kv_indices_buffer is None \
                or paged_kv_last_page_len_buffer is None:
            raise ValueError("CUDA-graph mode needs the three static index buffers")
        self.workspace, self.ledger = workspace, ledger
        self.indptr_buf, self.indices_buf = paged_kv_indptr_buffer, paged_kv_indices_buffer
        self.last_buf = paged_kv_last_page_len_buffer
        self.fixed_batch = len(paged_kv_indptr_buffer) - 1
        self.planned: dict[str, Any] | None = None
        self.plans = 0
        ledger.mark(workspace, self.indptr_buf, self.indices_buf, self.last_buf)
        StrictDecodeWrapper.instances.append(self)

    def plan(self, indptr: torch.Tensor, indices: torch.Tensor, last_page_len: torch.Tensor,
             num_qo_heads: int, num_kv_heads: int, head_dim: int, page_size: int, *,
             pos_encoding_mode: str = "NONE", q_data_type: torch.dtype = torch.float16,
             kv_data_type: torch.dtype | None = None, non_blocking: bool = True, **_: Any) -> None:
        if len(indptr) - 1 != self.fixed_batch:
            raise ValueError(f"batch size {len(indptr) - 1} does not match the fixed cuda graph batch "
                             f"size {self.fixed_batch}")
        # (The real dispatch covers head_dim 64, 128, 256, 512 only, so a real FlashInfer test uses 128;
        # this fake computes any head_dim so the tiny test model can run through it.)
        indptr.to("cpu")  # FlashInfer reads indptr on the host (a sync when it lives on the device)
        self.indptr_buf.copy_(indptr, non_blocking=non_blocking)
        self.last_buf.copy_(last_page_len, non_blocking=non_blocking)
        self.indices_buf[: len(indices)].copy_(indices, non_blocking=self.ledger.is_device(indices)
                                               and non_blocking)
        self.planned = dict(q=q_data_type, kv=kv_data_type or q_data_type, hq=num_qo_heads, hkv=num_kv_heads,
                            d=head_dim, page=page_size)
        self.plans += 1

    def run(self, q: torch.Tensor, kv: Any) -> torch.Tensor:
        if self.planned is None:
            raise RuntimeError("BatchDecodeWithPagedKVCacheWrapper.run() called before plan()")
        p = self.planned
        if q.dtype != p["q"]:
            raise ValueError(f"q dtype {q.dtype} but the plan said {p['q']}")
        k_pool, v_pool = kv if isinstance(kv, tuple) else (kv[:, 0], kv[:, 1])
        indptr, indices, last = self.indptr_buf.tolist(), self.indices_buf.tolist(), self.last_buf.tolist()
        rep = p["hq"] // p["hkv"]
        out = torch.empty_like(q)
        for i in range(self.fixed_batch):
            pages = indices[indptr[i]: indptr[i + 1]]
            n = (len(pages) - 1) * p["page"] + last[i]
            k = k_pool[pages].reshape(-1, p["hkv"], p["d"])[:n].float().repeat_interleave(rep, dim=1)
            v = v_pool[pages].reshape(-1, p["hkv"], p["d"])[:n].float().repeat_interleave(rep, dim=1)
            w = torch.softmax(torch.einsum("hd,nhd->hn", q[i].float(), k) / math.sqrt(p["d"]), dim=-1)
            out[i] = torch.einsum("hn,nhd->hd", w, v).to(q.dtype)
        return out


def strict_flashinfer(ledger: DeviceLedger) -> SimpleNamespace:
    StrictDecodeWrapper.instances = []

    def make(workspace: torch.Tensor, kv_layout: str = "NHD", **kw: Any) -> StrictDecodeWrapper:
        return StrictDecodeWrapper(workspace, kv_layout, ledger=ledger, **kw)

    return SimpleNamespace(BatchDecodeWithPagedKVCacheWrapper=make)
