"""A real model program (tiny checkpoint) driven by the engine on the sim executor: the stages are the
real ones, virtual time makes every batch's composition deterministic (requests submitted together
share their prefill, decode and codec batches)."""

from __future__ import annotations

from typing import Any

from voxcli.models.base import SynthesisRequest

from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.engine import Engine


def run_together(program: Any, chunk: ChunkSchedule, requests: list[SynthesisRequest]) -> list[Any]:
    """Submit every request at t=0, run until all ended; returns their streams (audio kept)."""
    import torch

    torch.set_num_threads(1)  # the sim runs the stages on this thread (conftest restores the count)
    cfg = EngineConfig(executor="sim", policy="full", chunk=chunk, kv_pages=512, kv_page_size=16,
                       codec_slots=12, max_running=16, max_prefill_batch=8, max_prefill_tokens=4096,
                       background_min_batch=4, threads=1)
    eng = Engine(program, cfg)
    try:
        streams = [eng.submit(r, at=0.0) for r in requests]
        eng.run()
        sched = eng.scheduler  # whatever failed, every page and slot is back
        assert sched.idle and sched.kv.free == cfg.kv_pages and sched.slots.free == cfg.codec_slots
        return streams
    finally:
        eng.close()
