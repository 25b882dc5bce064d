"""The few device operations the cuda executor needs, behind one small object.

`TorchCudaOps` is the real thing (streams, events, CUDA graphs, graph pools, pinned host mirrors).
Keeping them here, instead of calling torch.cuda all over the executor, lets the CPU tests drive the
executor's real launch / poll / finish logic with an eager stand-in (`tests/test_cuda_executor.py`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch


class TorchCudaOps:
    """Streams are torch.cuda streams (or ExternalStreams over green-context streams)."""

    warmup_runs = 3

    def __init__(self, device_index: int = 0) -> None:
        if not torch.cuda.is_available():
            raise RuntimeError("the cuda executor needs a CUDA device, and torch sees none; "
                               "use --executor cpu (or sim) on this machine")
        self.device = torch.device("cuda", device_index)

    @contextlib.contextmanager
    def on(self, stream: Any) -> Iterator[None]:
        with torch.cuda.stream(stream):
            yield

    def event(self) -> Any:
        return torch.cuda.Event()

    def record(self, event: Any, stream: Any) -> None:
        event.record(stream)

    def done(self, event: Any) -> bool:
        return bool(event.query())

    def wait_event(self, stream: Any, event: Any) -> None:
        stream.wait_event(event)

    def pool(self) -> Any:
        return torch.cuda.graph_pool_handle()

    def capture(self, run: Callable[[], dict[str, torch.Tensor]], stream: Any,
                pool: Any) -> tuple[Any, dict[str, torch.Tensor]]:
        """Warm up on the lane's own stream outside capture (lazy inits, autotuning, cuBLAS handles),
        then capture on that stream: the graph keeps the stream's SM partition for life."""
        with torch.cuda.stream(stream):
            for _ in range(self.warmup_runs):
                run()
        stream.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=pool, stream=stream):
            outputs = run()
        stream.synchronize()
        return graph, outputs

    def replay(self, graph: Any) -> None:
        graph.replay()  # launches on the CURRENT stream; callers wrap it in `on(lane_stream)`

    def host_mirror(self, t: torch.Tensor) -> torch.Tensor:
        return torch.empty(t.shape, dtype=t.dtype, device="cpu").pin_memory()

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device)
