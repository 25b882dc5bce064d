"""One request through a program's own stages at batch 1, on a private KV pool: prefill, then decode until the
request ends. The families' reference runs (their parity tests, the tiny builders' stop calibration) share
this loop; the engine never uses it (it batches rows and owns the pool)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .base import Row


def run_alone(program: Any, prompt: Any, pages: int, page: int = 16) -> Iterator[tuple[Row, Any]]:
    """Each step's output (prefill first, then every decode up to the one that ends the request), with the
    request's row, whose state the caller may read between steps; `pages` pages of `page` tokens."""
    program.init_kv(pages, page)
    row = Row(request_id=0, prompt=prompt, pages=list(range(pages)))
    out = program.prefill([row])[0]
    yield row, out
    while not out.done:
        out = program.decode([row])[0]
        yield row, out


def played_frames(program: Any, prompt: Any, pages: int, codebooks: int, page: int = 16) -> np.ndarray:
    """The codes [T, codebooks] of the frames the request plays, stacked ([0, codebooks] when none)."""
    frames = [out.frame for _, out in run_alone(program, prompt, pages, page) if out.frame is not None]
    return np.stack(frames) if frames else np.zeros((0, codebooks), dtype=np.int64)
