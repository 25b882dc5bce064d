"""One Kyutai TTS request through the program's own stages, batch 1 (tests, the calibration of the tiny
builders): prefill, then decode until the request ends, on a private KV pool; `decode_full` decodes codes in
one offline Mimi pass."""

from __future__ import annotations

import numpy as np
import torch

from ..base import SamplingParams, SynthesisRequest
from ..batch_one import played_frames


def generate_with(prog, text: str, voice: str | None = None, max_frames: int = 600, cfg: float | None = None,
                  options: dict | None = None) -> np.ndarray:
    """Greedy codes [T, K] of the frames the request plays."""
    req = SynthesisRequest(text=text, voice=voice, sampling=SamplingParams(greedy=True),
                           max_frames=max_frames, cfg_scale=cfg, options=options or {})
    prompt = prog.prepare(req)
    page = 16
    pages = -(-prog.kv_tokens(prompt) // page)
    return played_frames(prog, prompt, pages, prog.cfg.n_q, page)


def decode_full(program, codes: np.ndarray) -> np.ndarray:
    """codes [T, K] -> float32 PCM [T * 1920] in one offline Mimi forward."""
    wav = program.codec_model.decode(torch.from_numpy(np.asarray(codes).T[None].copy()))
    return wav[0, 0].float().cpu().numpy()
