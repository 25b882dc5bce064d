"""CosyVoice 2's device memory per unit (`MemoryNeeds`), from config dimensions alone.

Exact, from the shapes the program keeps (codec.py, flow.py):
- KV pool: K and V of every Qwen2 layer per position (2 x 24 x 2 kv heads x 64 at real size).
- Codec state that grows with the request, per speech token: the encoder's keys/values of its first
  stack (1 position per token) and its upsampled stack (2 per token) at output_size each, and per mel
  frame the estimator's keys/values of every transformer block (down, mid, up: (2 + mid) x n_blocks) for
  every Euler step and both CFG rows at heads x attention_head_dim: 10 x 2 x 14 x 4 x 2 x 512 x 4 B =
  2.3 MB per frame in fp32 at real size. The voice prompt's tokens hold the same from the first chunk on.
- Codec slot (fixed): the estimator's convolution tails (2 frames of each causal conv per step and row),
  the vocoder's 8-frame mel, 3840-sample source and 3840-sample speech overlap.
Estimates (upper bounds for the eager path), as CosyVoice 3's memory.py states them; and as there, a
request's LAST streamed chunk re-runs the flow over the whole utterance with full attention.
"""

from __future__ import annotations

import math

import torch

from ..base import MemoryNeeds
from .config import CosyVoice2Config

CONV_TAIL = 2  # kernel 3 causal convolutions keep 2 input frames


def _element(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype, device="meta").element_size()


def _blocks(cfg: CosyVoice2Config) -> int:
    d = cfg.flow.decoder
    return (2 + d.num_mid_blocks) * d.n_blocks


def state_bytes_per_token(cfg: CosyVoice2Config, dtype: torch.dtype) -> int:
    f, e, d = cfg.flow, cfg.flow.encoder, cfg.flow.decoder
    enc = 2 * e.output_size * (e.num_blocks + f.token_mel_ratio * e.up_blocks)
    est = f.token_mel_ratio * f.n_timesteps * 2 * _blocks(cfg) * 2 * d.num_heads * d.attention_head_dim
    return (enc + est) * _element(dtype)


def slot_bytes(cfg: CosyVoice2Config, dtype: torch.dtype) -> int:
    f, d = cfg.flow, cfg.flow.decoder
    ch = d.channels[0]
    convs = (2 + d.num_mid_blocks) * 2 * ch + d.in_channels + 2 * ch + 2 * ch  # resnet pairs, inputs, down/up
    vocoder = 8 * f.output_size + 2 * 8 * cfg.hift.upsample
    return (f.n_timesteps * 2 * CONV_TAIL * convs + vocoder) * _element(dtype)


def memory_needs(cfg: CosyVoice2Config, dtype: torch.dtype, prompt_tokens: int) -> MemoryNeeds:
    e = _element(dtype)
    q, d = cfg.lm.qwen, cfg.flow.decoder
    per_token = e * (6 * q.hidden_size + 3 * q.intermediate_size
                     + (q.num_attention_heads + 2 * q.num_key_value_heads) * q.head_dim)
    ch = d.channels[0]
    activations = (4 * ch + 3 * d.num_heads * d.attention_head_dim + 4 * ch) * e
    return MemoryNeeds(
        kv_bytes_per_position=2 * q.num_hidden_layers * q.num_key_value_heads * q.head_dim * e,
        codec_slot_bytes=slot_bytes(cfg, dtype),
        gather_bytes_per_position=2 * (q.num_key_value_heads + q.num_attention_heads) * q.head_dim * e + 1,
        prefill_bytes_per_token=per_token,
        prefill_bytes_per_token_pair=1 + e,
        decode_bytes_per_row=per_token + 2 * 4 * (cfg.lm.speech_token_size + 3),
        codec_bytes_per_frame=cfg.flow.token_mel_ratio * 2 * activations,
        codec_state_bytes_per_frame=state_bytes_per_token(cfg, dtype),
        codec_state_prefix_frames=math.ceil(prompt_tokens),
    )
