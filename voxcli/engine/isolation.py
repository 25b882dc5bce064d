"""Fault isolation: a stage that raises for a batch fails only the rows whose own data caused it.

The engine batches unrelated requests; one request's bad data (a sampling value the kernels cannot take,
codes a codec refuses) must not cost its batch-mates their audio. When a stage call raises, the
batch's rows are re-run on the same state in halves, recursively: a part that succeeds keeps its
results (those rows have now advanced exactly once), a part that fails is split again, and a row that
fails on its own is the culprit; it gets the error of its own solo run. The other rows go on with the
audio they would have had without it (only their batch composition changed, which the batching-exactness
bound covers).

Re-running is sound because of the program contract (models/base.py, "Re-runnability"): a stage that
raises leaves every row's state as it was before the call (sampler RNG, delay-pattern and host token
state, `kv_len`, codec slot state), and the device memory it may have written (KV positions at and past
each row's `kv_len`, its own pages only) is written again by the re-run.

Not per-row: an error that every row raises on its own (a broken device, a bug in the stage) fails the
whole batch with the original error, as before isolation; so does a device fault recognized up front
(out of memory, a CUDA error: the device state after one is not trusted, and re-running on it could hang
or corrupt other rows). Cost: a batch of n rows with one bad row re-runs about 2 log2(n) sub-batches
(every row still succeeds exactly once); with every row bad, 2n - 2 calls before the batch fails.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# Messages of errors that are the device's, not a row's (torch raises most CUDA failures as RuntimeError).
_DEVICE_MARKERS = ("CUDA error", "CUDA out of memory", "CUBLAS_STATUS", "CUDNN_STATUS", "cuDNN error",
                   "device-side assert", "an illegal memory access", "NCCL error", "out of memory")


def is_device_fault(e: BaseException) -> bool:
    """True for errors that say the device (or the host's memory) failed, not the data of a row."""
    if isinstance(e, MemoryError):
        return True
    name = type(e).__name__
    if name in ("OutOfMemoryError", "AcceleratorError", "CudaError"):
        return True
    text = str(e)
    return any(m in text for m in _DEVICE_MARKERS)


@dataclass
class Isolated:
    """The outcome of a stage call under isolation: one result per row (a row's own exception in place
    of its result when it was found responsible) and how many extra stage calls finding it took
    (0 = the batch ran once, as usual)."""

    results: list[Any]
    reruns: int = 0


def run_isolated(call: Callable[[list[Any]], list[Any]], rows: Sequence[Any]) -> Isolated:
    """Run `call(rows)`; if it raises, find the responsible rows by re-running halves (see module doc).
    Raises the original error when it is a device fault or when every row fails on its own."""
    rows = list(rows)
    try:
        return Isolated(_checked(call, rows))
    except Exception as e:
        if len(rows) <= 1 or is_device_fault(e):
            raise
        first = e
    out: list[Any] = [None] * len(rows)
    reruns = _bisect(call, rows, list(range(len(rows))), first, out)
    if all(isinstance(r, BaseException) for r in out):
        raise first  # every row fails alone: not a row's data, the batch fails as it would have
    return Isolated(out, reruns)


def _checked(call: Callable[[list[Any]], list[Any]], rows: list[Any]) -> list[Any]:
    result = call(rows)
    if result is None or len(result) != len(rows):
        n = 0 if result is None else len(result)
        raise RuntimeError(f"the stage returned {n} results for {len(rows)} rows")
    return list(result)


def _bisect(call: Callable[[list[Any]], list[Any]], rows: list[Any], idx: list[int], error: Exception,
            out: list[Any]) -> int:
    """`idx` (more than one row) failed together with `error`: run each half; returns the calls made."""
    if len(idx) == 1:
        out[idx[0]] = error
        return 0
    calls = 0
    half = len(idx) // 2
    for part in (idx[:half], idx[half:]):
        calls += 1
        try:
            results = _checked(call, [rows[i] for i in part])
        except Exception as e:
            if is_device_fault(e):
                raise
            calls += _bisect(call, rows, part, e, out)
            continue
        for i, r in zip(part, results, strict=True):
            out[i] = r
    return calls
