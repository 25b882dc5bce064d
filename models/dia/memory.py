"""Dia's device memory per unit (`MemoryNeeds`), from config dimensions alone (nothing allocated).

Exact: the self-attention pool (K and V of every decoder layer per position; the cross-attention K/V
of a request is packed into the same pages, which `kv_tokens` counts as positions), a DAC codec slot
(its decoder's streaming state shapes, built on the meta device) and the weights of the DAC, which
the program reads on first use. Estimates, upper bounds for the eager torch path:
- extra positions per row: the delay pattern's tail (max_delay) and the packed cross K/V of the
  longest text the encoder reads (its max_position_embeddings tokens, cross width / self width each).
- gather: the dense copy of one layer's K/V (+ grouped-query expansion) per position in use, plus the
  cached dense cross K/V of the decode batch (every layer): the pool's bytes again for the share of a
  row that is cross K/V at the checkpoint's context (cross / (cross + max_position_embeddings)).
- prefill per token / pair, decode per row: as for Qwen3-TTS (residual stream, SwiGLU, q/k/v; the
  mask and its float copy; float32 logits of the 9 channels twice).
- codec per frame: the largest activation of the DAC decoder per frame (meta-device forward of one
  chunk) four times over.
"""

from __future__ import annotations

import torch

from ..base import MemoryNeeds
from ..codecs.dac.config import DacCodecConfig
from ..codecs.dac.memory import dac_costs
from .config import DiaConfig


def memory_needs(cfg: DiaConfig, dac: DacCodecConfig, dtype: torch.dtype, guidance: float | None,
                 codec_loaded: bool) -> MemoryNeeds:
    e = torch.empty((), dtype=dtype, device="meta").element_size()
    d = cfg.decoder
    self_elems = d.num_key_value_heads * d.head_dim
    cross_elems = d.cross_num_key_value_heads * d.cross_head_dim
    kv = 2 * d.num_hidden_layers * self_elems * e
    per_token = e * (6 * d.hidden_size + 3 * d.intermediate_size
                     + (d.num_attention_heads + 2 * d.num_key_value_heads) * d.head_dim)
    slot, per_frame, dac_weights = dac_costs(dac, dtype)
    cross_positions = -(-cfg.encoder.max_position_embeddings * cross_elems // self_elems)
    cross_dense = kv * cross_positions // (cross_positions + d.max_position_embeddings)
    return MemoryNeeds(
        kv_bytes_per_position=kv,
        codec_slot_bytes=slot,
        gather_bytes_per_position=cross_dense + 2 * (self_elems + d.num_attention_heads * d.head_dim) * e + 1,
        prefill_bytes_per_token=per_token,
        prefill_bytes_per_token_pair=1 + e,
        decode_bytes_per_row=per_token + 2 * 4 * d.num_channels * d.vocab_size,
        codec_bytes_per_frame=per_frame,
        pending_weight_bytes=0 if codec_loaded else dac_weights,
        extra_positions_per_row=cfg.max_delay + cross_positions,
        rows_per_request=2 if guidance is not None and guidance != 1 else 1,
    )
