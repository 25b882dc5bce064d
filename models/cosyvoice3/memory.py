"""CosyVoice 3's device memory per unit (`MemoryNeeds`), from config dimensions alone (nothing allocated).

Exact, from the shapes the program keeps:
- KV pool: K and V of every Qwen2 layer per position (2 x 24 x 2 kv heads x 64 at real size).
- Codec state that grows with the request (codec.py / dit.py): per mel frame, the DiT's rotated keys and
  values of every layer for every Euler step and both CFG rows (n_timesteps x 2 x depth x 2 x heads x
  dim_head values: 10 x 2 x 22 x 2 x 1024 x 4 B = 3.6 MB in fp32 at real size), plus the vocoder's mel
  (80 values), f0 (1) and phase increments (harmonics + 1, float32) of that frame. Two mel frames per
  speech token (token_mel_ratio), and the voice prompt's mel frames from the request's first chunk on.
- Codec slot (fixed): the two position convolutions' 30-frame left contexts per Euler step and CFG row.
Estimates (upper bounds for the eager path), as Qwen3-TTS's memory.py states them:
- gather per position: the paged attention copies one layer's K/V densely and may expand the grouped
  heads: 2 x (kv_heads + heads) x head_dim values.
- prefill per token: residual and norms (6 x hidden), SwiGLU (3 x intermediate), q/k/v; per token pair
  the mask byte and its float copy. Decode per row: one token's worth plus the speech head's logits.
- codec per frame of a batch: per mel frame x 2 CFG rows, the DiT layer's live activations (input, norm,
  q, k, v, attention output, residual: 8 x dim, plus the FFN's 2 x ff_mult x dim).
Not covered: a request's LAST chunk re-runs the flow over the whole utterance with full attention
(upstream's definition of the streamed output) and its activations grow with the utterance, not the
chunk; the per-request state budget is the larger term by far (~7 MB per token against ~0.3 MB).
"""

from __future__ import annotations

import math

import torch

from ..base import MemoryNeeds
from ..dtypes import dtype_name
from .config import CosyVoice3Config
from .spec import DTYPE_POLICY

CONV_CONTEXT = 30  # left context of each of the DiT's two position convolutions (dit.CONV_KERNEL - 1)


def _element(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype, device="meta").element_size()


def dit_cache_bytes_per_mel_frame(cfg: CosyVoice3Config, dtype: torch.dtype) -> int:
    """The DiT keys/values one mel frame keeps: every layer, Euler step and CFG row."""
    f, d = cfg.flow, cfg.flow.dit
    return f.n_timesteps * 2 * d.depth * 2 * d.heads * d.dim_head * _element(dtype)


def state_bytes_per_mel_frame(cfg: CosyVoice3Config, dtype: torch.dtype) -> int:
    """All per-request codec state of one mel frame: DiT caches + the vocoder's mel, f0 and phases."""
    vocoder_dtype = DTYPE_POLICY.torch_dtype("vocoder", dtype_name(dtype))
    vocoder = (cfg.flow.output_size + 1) * _element(vocoder_dtype) + (cfg.hift.nb_harmonics + 1) * 4
    return dit_cache_bytes_per_mel_frame(cfg, dtype) + vocoder


def state_bytes_per_token(cfg: CosyVoice3Config, dtype: torch.dtype) -> int:
    """Per-request codec state per speech token (one backbone frame = token_mel_ratio mel frames)."""
    return cfg.flow.token_mel_ratio * state_bytes_per_mel_frame(cfg, dtype)


def slot_bytes(cfg: CosyVoice3Config, dtype: torch.dtype) -> int:
    d = cfg.flow.dit
    return cfg.flow.n_timesteps * 2 * 2 * CONV_CONTEXT * d.dim * _element(dtype)


def memory_needs(cfg: CosyVoice3Config, dtype: torch.dtype, prompt_mel_frames: int) -> MemoryNeeds:
    """`prompt_mel_frames`: the longest voice prompt's mel frames (what a request holds before its first
    token's frames)."""
    e = _element(dtype)
    q, d = cfg.lm.qwen, cfg.flow.dit
    per_token = e * (6 * q.hidden_size + 3 * q.intermediate_size
                     + (q.num_attention_heads + 2 * q.num_key_value_heads) * q.head_dim)
    activations = (8 + 2 * d.ff_mult) * d.dim * e
    return MemoryNeeds(
        kv_bytes_per_position=2 * q.num_hidden_layers * q.num_key_value_heads * q.head_dim * e,
        codec_slot_bytes=slot_bytes(cfg, dtype),
        gather_bytes_per_position=2 * (q.num_key_value_heads + q.num_attention_heads) * q.head_dim * e + 1,
        prefill_bytes_per_token=per_token,
        prefill_bytes_per_token_pair=1 + e,
        decode_bytes_per_row=per_token + 2 * 4 * cfg.lm.vocab,
        codec_bytes_per_frame=cfg.flow.token_mel_ratio * 2 * activations,
        codec_state_bytes_per_frame=state_bytes_per_token(cfg, dtype),
        codec_state_prefix_frames=math.ceil(prompt_mel_frames / cfg.flow.token_mel_ratio),
    )
