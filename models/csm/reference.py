"""One CSM request through the program's own stages, batch 1, greedy (the tiny builder's EOS calibration,
tests): prefill, then decode until the request ends, on a private KV pool; `decode_full` decodes codes in
one Mimi pass (no streaming)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from ..base import SamplingParams, SynthesisRequest
from ..batch_one import played_frames


@lru_cache(maxsize=2)
def _program(path: str, dtype: str):
    from .program import CsmProgram

    return CsmProgram.load(path, dtype=dtype)


def generate(
    path: str,
    text: str,
    voice: str = "0",
    max_frames: int = 200,
    dtype: str = "float32",
    ref_codes: np.ndarray | None = None,
    ref_text: str | None = None,
) -> np.ndarray:
    """Greedy codes [T, K] of the frames played (the ending frame only when the model plays it)."""
    return generate_with(_program(path, dtype), text, voice, max_frames, ref_codes, ref_text)


def generate_with(
    prog,
    text: str,
    voice: str = "0",
    max_frames: int = 200,
    ref_codes: np.ndarray | None = None,
    ref_text: str | None = None,
) -> np.ndarray:
    """`generate` with a loaded program."""
    req = SynthesisRequest(
        text=text, voice=voice, sampling=SamplingParams(greedy=True), max_frames=max_frames, ref_text=ref_text
    )
    prompt = prog.prepare(req, ref_codes=ref_codes)
    page = 16
    pages = -(-(prompt.length + max_frames + 1) // page)
    return played_frames(prog, prompt, pages, prog.cfg.num_codebooks, page)


def decode_full(program, codes: np.ndarray) -> np.ndarray:
    """codes [T, K] -> float32 PCM [T * 1920] in one offline Mimi forward."""
    wav = program.codec_model.decode(torch.from_numpy(np.asarray(codes).T[None].copy()))
    return wav[0, 0].float().cpu().numpy()
