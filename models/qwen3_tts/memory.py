"""Qwen3-TTS's device memory per unit (`MemoryNeeds`), from config dimensions alone (nothing allocated).

Exact: the KV pool (K and V of every talker layer per position) and a codec slot (the streaming state
shapes of the speech tokenizer's decoder, built on the meta device). Estimates, each an upper bound for
the eager CPU/torch path, which is the hungrier one:
- gather: `paged_attention` (models/layers) copies the batch's K/V of one layer densely, and SDPA's
  grouped-query path may expand it to every query head: 2 x (kv_heads + heads) x head_dim values per
  position in use.
- prefill per token: the residual stream and norms (6 x hidden), the SwiGLU's gate/up/product
  (3 x intermediate) and q/k/v (heads + 2 kv_heads) x head_dim, in the model dtype; per token pair
  the boolean mask byte and SDPA's float copy of it (its fused kernels never hold the scores: measured
  85 MB for one 4,096-token row at 16 heads on this CPU, where the scores alone would be 1 GB).
- decode per row: one prefill token's worth for the talker step, the two vocabularies' float32
  logits twice (scores and their processed copy) and the code predictor's 16-position dense cache.
- codec per frame: the largest activation of the decoder per frame (found by a meta-device forward
  of one chunk) four times over (input, output, residual and the SnakeBeta temporary).
"""

from __future__ import annotations

import math

import torch

from ..base import MemoryNeeds
from .codec import CodecDecoder, CodecDecoderConfig
from .config import TalkerConfig

_PROBE_FRAMES = 8  # chunk length of the meta-device codec forward


def _element(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype, device="meta").element_size()


def codec_costs(cfg: CodecDecoderConfig, dtype: torch.dtype) -> tuple[int, int, int]:
    """(bytes per codec slot, peak activation bytes per frame, weight bytes) of the decoder in `dtype`."""
    e = _element(dtype)
    with torch.device("meta"):
        dec = CodecDecoder(cfg)
    slot = sum(math.prod(s) * (8 if k.endswith(".pos") else e) for k, s in dec.state_shapes().items())
    peak = [0]

    def hook(_m: torch.nn.Module, _i: object, out: object) -> None:
        if isinstance(out, torch.Tensor):
            peak[0] = max(peak[0], out.numel())

    handles = [m.register_forward_hook(hook) for m in dec.modules()]
    try:
        with torch.no_grad():
            dec(torch.zeros(1, cfg.num_quantizers, _PROBE_FRAMES, dtype=torch.long, device="meta"))
    finally:
        for h in handles:
            h.remove()
    weights = sum(p.numel() for p in dec.parameters()) * e
    return slot, 4 * e * -(-peak[0] // _PROBE_FRAMES), weights


def memory_needs(talker: TalkerConfig, codec: CodecDecoderConfig, dtype: torch.dtype,
                 codec_loaded: bool) -> MemoryNeeds:
    e = _element(dtype)
    b, p = talker.block, talker.predictor.block
    kv = 2 * b.num_hidden_layers * b.num_key_value_heads * b.head_dim * e
    per_token = e * (6 * b.hidden_size + 3 * b.intermediate_size
                     + (b.num_attention_heads + 2 * b.num_key_value_heads) * b.head_dim)
    groups = talker.num_code_groups
    predictor_cache = 2 * p.num_hidden_layers * p.num_key_value_heads * p.head_dim * e * groups
    logits = 2 * 4 * (talker.vocab_size + talker.predictor.vocab_size)
    slot, per_frame, codec_weights = codec_costs(codec, dtype)
    return MemoryNeeds(
        kv_bytes_per_position=kv,
        codec_slot_bytes=slot,
        gather_bytes_per_position=2 * (b.num_key_value_heads + b.num_attention_heads) * b.head_dim * e + 1,
        prefill_bytes_per_token=per_token,
        prefill_bytes_per_token_pair=1 + e,
        decode_bytes_per_row=per_token + logits + predictor_cache,
        codec_bytes_per_frame=per_frame,
        pending_weight_bytes=0 if codec_loaded else codec_weights,
    )
