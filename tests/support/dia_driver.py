"""A batch-1 driver for the Dia program without the engine (parity tests): pages from a plain list,
prefill then decode until done; returns the aligned frames [F, C]."""

from __future__ import annotations

import numpy as np
from voxcli.models.base import Prompt, Row


def run_alone(program, prompt: Prompt, page_size: int = 16, max_steps: int = 100_000) -> np.ndarray:
    program.init_kv(num_pages=1, page_size=page_size)  # to learn the size in pages, then for real
    program.init_kv(num_pages=-(-program.kv_tokens(prompt) // page_size), page_size=page_size)
    n = -(-program.kv_tokens(prompt) // program.page_size)
    row = Row(request_id=0, prompt=prompt, pages=list(range(n)))
    frames = []
    out = program.prefill([row])[0]
    steps = 0
    while True:
        if out.frame is not None:
            frames.append(out.frame)
        if out.done:
            break
        steps += 1
        assert steps < max_steps
        out = program.decode([row])[0]
    program.release(row)
    C = program.spec.codebooks
    return np.stack(frames) if frames else np.zeros((0, C), dtype=np.int64)
