"""The "alone vs among 7 others" check on the real engine (cpu executor), shared by the Dia, Higgs Audio and
Zonos engine tests: a target request runs alone on a roomy engine, then among others (four submitted
before it, three after, staggered) on an engine whose KV pool and codec slot table are small enough that
pages and slots are reused. The caller asserts on the result: the two waveforms, every request's status,
the pool and slots given back, and the decode batches the target shared (recorded per row by `row`)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from voxcli.models.base import SynthesisRequest

from voxcli.config import ChunkSchedule, EngineConfig
from voxcli.engine.engine import Engine


def request_id(row: Any) -> Any:
    return row.request_id


def engine_for(ckpt: Path, kv_pages: int, codec_slots: int, page_size: int = 8, first_chunk: int = 12,
               batches: list | None = None, row: Callable[[Any], Any] = request_id) -> Engine:
    """A cpu engine on `ckpt`; with `batches`, every decode batch is recorded as [row(r) for r in rows]."""
    from voxcli.models import load_model

    program = load_model(str(ckpt))
    if batches is not None:
        inner = program.decode

        def decode(rows):  # noqa: ANN001, ANN202
            batches.append([row(r) for r in rows])
            return inner(rows)

        program.decode = decode
    chunk = ChunkSchedule(first=first_chunk, ramp=(8,), steady=16)
    cfg = EngineConfig(executor="cpu", policy="full", chunk=chunk,
                       kv_pages=kv_pages, kv_page_size=page_size, codec_slots=codec_slots, max_running=6,
                       background_min_batch=2, threads=1)
    return Engine(program, cfg)


@dataclass
class AloneVsAmong:
    alone: np.ndarray
    got: np.ndarray
    target_id: Any
    failures: list[tuple[str, str | None]]  # (status, reason) of every other request not done
    kv_free: int
    slots_free: int
    batches: list


def alone_vs_among(ckpt: Path, target: SynthesisRequest, others: list[SynthesisRequest], *, roomy_pages: int,
                   kv_pages: int, codec_slots: int = 3, stagger: float = 0.05,
                   row: Callable[[Any], Any] = request_id, **engine: Any) -> AloneVsAmong:
    eng = engine_for(ckpt, roomy_pages, 8, **engine)
    alone = eng.submit(target).wait(timeout=300)
    eng.close()

    batches: list = []
    eng = engine_for(ckpt, kv_pages, codec_slots, batches=batches, row=row, **engine)
    streams = []
    for i, req in enumerate(others[:4]):
        streams.append(eng.submit(req))
        time.sleep(stagger * i)
    tgt = eng.submit(target)
    for req in others[4:]:
        time.sleep(stagger)
        streams.append(eng.submit(req))
    got = tgt.wait(timeout=300)
    for s in streams:
        s.wait(timeout=300)
    sched = eng.scheduler
    eng.close()
    return AloneVsAmong(alone=alone, got=got, target_id=tgt.request_id,
                        failures=[(s.status, s.reason) for s in streams if s.status != "done"],
                        kv_free=sched.kv.free, slots_free=sched.slots.free, batches=batches)
