"""CSM's device memory per unit (`MemoryNeeds`), from config dimensions alone (nothing allocated), so the
engine sizes its KV pool and codec slots from free memory.

Exact: the backbone's KV pool (K and V of every layer per position) and a codec slot (Mimi's streaming
state: the decoder transformer's window of K/V plus every causal conv's history, `MimiCodec.slot_bytes`).
Estimates, upper bounds for the eager torch path (as Higgs Audio's, models/higgs_audio/memory.py):
- gather: one layer's dense K/V with the grouped-query expansion, per position in use;
- prefill per token: the residual stream, the SwiGLU intermediates and q/k/v; per token pair: the mask
  and its float copy; decode per row: the same plus the depth decoder's per-frame cache (K positions of
  every depth layer) and float32 logits of the backbone and one depth head;
- codec per frame: 1920 samples through the SEANet decoder's widest stage (512 channels at 25 Hz down to
  64 at 24 kHz): its largest activation, 64 channels x 1920 samples, four times over.
"""

from __future__ import annotations

import torch

from ..base import MemoryNeeds
from .config import CsmConfig


def memory_needs(cfg: CsmConfig, dtype: torch.dtype, codec_slot_bytes: int) -> MemoryNeeds:
    e = torch.empty((), dtype=dtype, device="meta").element_size()
    b, d = cfg.backbone, cfg.depth
    kv_elems = b.num_kv_heads * b.head_dim
    per_token = e * (
        6 * b.hidden_size + 3 * b.intermediate_size + (b.num_heads + 2 * b.num_kv_heads) * b.head_dim
    )
    depth_cache = 2 * d.num_layers * cfg.num_codebooks * d.num_kv_heads * d.head_dim * e
    c = cfg.codec
    return MemoryNeeds(
        kv_bytes_per_position=2 * b.num_layers * kv_elems * e,
        codec_slot_bytes=codec_slot_bytes,
        gather_bytes_per_position=2 * (kv_elems + b.num_heads * b.head_dim) * e,
        prefill_bytes_per_token=per_token,
        prefill_bytes_per_token_pair=1 + e,
        decode_bytes_per_row=per_token + depth_cache + 2 * 4 * cfg.vocab_size,
        codec_bytes_per_frame=4 * e * c.num_filters * c.samples_per_frame,
    )
