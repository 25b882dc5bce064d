"""A Qwen3-TTS request's decode state (Row.state) and its random stream: what the eager program
(program.py) and the CUDA-graph stages (graph_stages.py) both step, so that both draw the same uniforms
and apply the same EOS rule."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .sampling import RowSampling

MIN_NEW_TOKENS = 2  # the reference masks EOS for the first two talker tokens


@dataclass
class RowState:
    """Per-request decode state (lives in Row.state)."""

    sampling: RowSampling
    gen: torch.Generator  # CPU generator: the request's own random stream
    seen: torch.Tensor  # [V] bool: c0 tokens produced so far (repetition penalty)
    generated: int  # talker tokens produced so far
    h: torch.Tensor  # [H] final-norm hidden that produced the pending c0
    c0: torch.Tensor  # [] pending codebook-0 token
    trailing: torch.Tensor  # [N, H]
    tts_pad: torch.Tensor  # [H]
    limit: int  # frames after which the request stops
    fixed: bool  # bench: ignore EOS, emit exactly `limit` frames
    packed: np.ndarray | None = None  # graph_stages: the sampling settings as one row, packed once
    pages: tuple[list[int], np.ndarray] | None = None  # graph_stages: Row.pages and its numpy copy
    ublock: torch.Tensor | None = None  # uniforms drawn ahead from `gen` (next_uniforms)
    uidx: int = 0


UNIFORM_BLOCK = 64  # steps of uniforms drawn from a request's generator at once


def peek_uniforms(st: RowState) -> torch.Tensor:
    """The uniforms `next_uniforms` will return next, without consuming them."""
    if st.ublock is None or st.uidx >= st.ublock.shape[0]:
        st.ublock = torch.rand(UNIFORM_BLOCK, 16, generator=st.gen, dtype=torch.float64)
        st.uidx = 0
    return st.ublock[st.uidx]


def next_uniforms(st: RowState) -> torch.Tensor:
    """This step's 16 uniforms (15 predictor groups + c0) from the request's own generator. Drawn
    UNIFORM_BLOCK steps at a time: the CPU generator fills a tensor element by element in order, so the
    values are exactly those of one `torch.rand(16)` per step, at a fraction of the calls."""
    u = peek_uniforms(st)
    st.uidx += 1
    return u
