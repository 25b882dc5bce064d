"""CUDA helpers of gpu_check's steps: event timing on a stream, graph capture as the executor does it, the
sticky-error probe, the engine config of the checks, the lane streams."""

from __future__ import annotations

import statistics
from typing import Any

from benchmarks.gpu.results import STATE
from benchmarks.gpu.steps import QUICK


def timed(fn, stream, reps: int = 10, warm: int = 2) -> float:  # noqa: ANN001
    """Median ms of `fn()` enqueued on `stream`, timed by events on that stream."""
    import torch

    with torch.cuda.stream(stream):
        for _ in range(warm):
            fn()
    stream.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(stream):
            a.record(stream)
            fn()
            b.record(stream)
        b.synchronize()
        times.append(a.elapsed_time(b))
    return round(statistics.median(times), 4)


def capture(gs: Any, stream: Any, pool: Any = None, warm: int = 2) -> Any:
    """A graph of the stage `gs` on `stream`, primed and warmed up there first (as the executor does)."""
    import torch

    with torch.cuda.stream(stream):
        if gs.prime is not None:
            gs.prime()
        for _ in range(warm):
            gs.run()
    stream.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, pool=pool, stream=stream):
        gs.run()
    stream.synchronize()
    return g


def cuda_healthy() -> str | None:
    """None when the context still works, else the error (a sticky error poisons every later call)."""
    import torch

    try:
        torch.cuda.synchronize()
        x = torch.ones(8, device="cuda")
        if float((x + 1).sum().item()) != 16.0:
            return "arithmetic check failed"
        return None
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def engine_config(policy: str, quick: bool, lm_sms: int, codec_sms: int) -> Any:
    from voxcli.config import load_recipe

    # 2048 pages of 64 = 131k KV positions (14 GiB at 1.7B): ample for 3 buckets and a short bench, and
    # the parent's pool and a bench child's fit the device together.
    sets = [f"policy={policy}", "executor=cuda", "device=cuda", "dtype=bfloat16", f"lm_sms={lm_sms}",
            f"codec_sms={codec_sms}", "kv_pages=2048"]
    if quick:
        sets += [f"decode_buckets={list(QUICK['decode'])}", f"background_buckets={list(QUICK['background'])}",
                 f"urgent_buckets={list(QUICK['urgent'])}"]
    return load_recipe("qwen3-tts-1.7b", sets)


def lane_streams() -> dict[str, Any]:
    s = STATE["streams"]
    return {"backbone": s.lm, "codec": s.codec, "device": s.device}
