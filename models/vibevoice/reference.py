"""One VibeVoice request through the program's own stages, batch 1 (parity tests, benchmarks): prefill,
then decode until the request ends, on a private KV pool. Returns the generated tokens and the audio."""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..base import SynthesisRequest
from ..batch_one import run_alone
from .program import unpack_pcm


@lru_cache(maxsize=2)
def _program(path: str, dtype: str):
    from .program import VibeVoiceProgram

    return VibeVoiceProgram.load(path, dtype=dtype)


def generate(path: str, text: str, seed: int, voice: str = "0", max_frames: int = 200,
             dtype: str = "float32") -> tuple[list[int], np.ndarray]:
    return generate_with(_program(path, dtype), text, seed, voice, max_frames)


def generate_with(prog, text: str, seed: int, voice: str = "0",
                  max_frames: int = 200) -> tuple[list[int], np.ndarray]:
    prompt = prog.prepare(SynthesisRequest(text=text, voice=voice, seed=seed, max_frames=max_frames))
    page = 16
    prog.page_size = page
    pages = prog.kv_tokens(prompt) // page
    audio, tokens = [], []
    for row, out in run_alone(prog, prompt, pages, page):
        tokens.append(row.state.last_token)
        if out.frame is not None:
            audio.append(unpack_pcm(out.frame))
    return tokens, (np.concatenate(audio) if audio else np.zeros(0, np.float32))
