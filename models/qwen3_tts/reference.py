"""Batch-1 reference path: one request through the SAME stage functions the engine drives
(prepare -> prefill -> decode... -> full codec forward). Used by parity tests and the tiny builder's
EOS calibration.

It uses the program's KV pool (allocating a small one when there is none, or it is too small), so do
not call it on a program that is serving requests at the same time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ..base import Prompt, Row, SynthesisRequest
from ..layers import PagedBatch
from .program import SAMPLES_PER_FRAME, Qwen3TTSProgram

PAGE = 16


@dataclass
class Trace:
    prompt: Prompt
    hidden: list[torch.Tensor] = field(default_factory=list)  # final-norm hidden of each talker token
    tokens: list[int] = field(default_factory=list)  # every sampled c0 (incl. a final EOS)


def _ensure_pool(program: Qwen3TTSProgram, positions: int) -> list[int]:
    pages = math.ceil(positions / PAGE)
    if program.k_pool is None or program.page_size != PAGE or program.k_pool.shape[1] < pages:
        program.init_kv(pages, PAGE)
    return list(range(pages))


def run_codes(program: Qwen3TTSProgram, prompt: Prompt, trace: Trace | None = None) -> np.ndarray:
    """Generate the frames of one prepared prompt: codes [T, 16] int64."""
    pages = _ensure_pool(program, program.kv_tokens(prompt))
    row = Row(request_id=0, prompt=prompt, pages=pages)
    program.prefill([row])
    if trace is not None:
        trace.hidden.append(row.state.h.clone())
        trace.tokens.append(int(row.state.c0))
    frames = []
    while True:
        out = program.decode([row])[0]
        frames.append(out.frame)
        if trace is not None:
            trace.hidden.append(row.state.h.clone())
            trace.tokens.append(int(row.state.c0))
        if out.done:
            break
    program.release(row)
    return np.stack(frames).astype(np.int64)


def decode_full(
    program: Qwen3TTSProgram, codes: np.ndarray, ref_codes: np.ndarray | None = None
) -> np.ndarray:
    """Waveform of `codes` with one full codec forward; ICL: decode ref ++ codes and cut the reference
    part with the reference package's proportional formula."""
    allc = codes if ref_codes is None else np.concatenate([ref_codes, codes])
    t = torch.as_tensor(allc.T[None].copy(), dtype=torch.long)
    wav = program.codec_model.full_forward(t)[0, 0].float().cpu().numpy()
    if ref_codes is not None:
        cut = int(ref_codes.shape[0] / max(allc.shape[0], 1) * wav.shape[0])
        wav = wav[cut:]
    return wav.astype(np.float32)


def generate(
    program: Qwen3TTSProgram,
    request: SynthesisRequest,
    *,
    with_wav: bool = True,
    trace: Trace | None = None,
    **prepare_kw,
) -> tuple[np.ndarray, np.ndarray | None]:
    """-> (codes [T, 16] int64, wav float32 [T * 1920] or None)."""
    prompt = program.prepare(request, **prepare_kw)
    if trace is not None:
        trace.prompt = prompt
    codes = run_codes(program, prompt, trace)
    if not with_wav:
        return codes, None
    return codes, decode_full(program, codes, prompt.data.emb.ref_codes)


@torch.inference_mode()
def teacher_forced(
    program: Qwen3TTSProgram, prompt: Prompt, codes: np.ndarray
) -> tuple[torch.Tensor, torch.Tensor]:
    """Raw logits along a given trajectory, in one causal pass over prompt + frames:
    talker logits [T+1, V] (token t, before any sampling rule) and predictor logits [T, 15, codebook]."""
    talker = program.talker
    emb = prompt.data.emb
    T = codes.shape[0]
    c = torch.as_tensor(codes, dtype=torch.long, device=program.device)
    c0_emb = talker.codec(c[:, 0])
    frame_sum = talker.code_predictor.embed_frame_sum(c0_emb, c[:, 1:])
    n_tr = emb.trailing.shape[0]
    text = torch.stack([emb.trailing[t] if t < n_tr else emb.tts_pad for t in range(T)]) if T else frame_sum
    x = torch.cat([emb.embeds, frame_sum + text])[None].to(program.dtype)
    L = x.shape[1]
    b = program.cfg.talker.block
    pages = math.ceil(L / PAGE)
    shape = (b.num_hidden_layers, pages, PAGE, b.num_key_value_heads, b.head_dim)
    k = torch.zeros(shape, device=program.device, dtype=program.dtype)
    v = torch.zeros_like(k)
    pos = torch.arange(L, device=program.device)[None]
    pb = PagedBatch(
        q_pos=pos,
        slots=pos.clone(),
        block_table=torch.arange(pages, device=program.device)[None],
        kv_len=torch.tensor([L], device=program.device),
        page_size=PAGE,
    )
    hid = talker.hidden_states(x, pb, k, v)[0]
    n0 = emb.embeds.shape[0]
    h_tokens = hid[n0 - 1 :]  # hidden that produced token t, t = 0..T
    talker_logits = talker.codec_head(h_tokens)
    pred = talker.code_predictor.teacher_forced_logits(h_tokens[:T], c0_emb, c[:, 1:])
    return talker_logits.float(), pred.float()


def samples_for(frames: int) -> int:
    return frames * SAMPLES_PER_FRAME
