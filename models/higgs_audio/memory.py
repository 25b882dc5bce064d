"""Higgs Audio's device memory per unit (`MemoryNeeds`), from config dimensions alone (nothing allocated), so
the engine sizes its KV pool and codec slots from free memory instead of taking the recipe's caps as given.

Exact: the KV pool (K and V of every layer per position), a codec slot (the decoder's streaming state
shapes, built on the meta device), the decoder's weights when it is still to be read (v2: on first use).
Estimates, upper bounds for the eager torch path (as Dia's, models/dia/memory.py):
- extra positions per row: the delay fill and drain (num_codebooks + 1), as `kv_tokens` counts them;
- gather: one layer's dense K/V with the grouped-query expansion, per position in use;
- prefill per token: the residual stream, the SwiGLU intermediates (twice with DualFFN) and q/k/v;
  per token pair: the mask and its float copy; decode per row: the same plus float32 logits of the
  8 x codebook_size head, twice;
- codec per frame: the decoder's largest activation per frame (meta-device forward) four times over.
"""

from __future__ import annotations

import math

import torch

from ..base import MemoryNeeds
from .codec import HiggsCodecConfig, HiggsDecoderNet
from .config import HiggsConfig

_PROBE_FRAMES = 12


def decoder_costs(cfg: HiggsCodecConfig, dtype: torch.dtype) -> tuple[int, int, int]:
    """(bytes per codec slot, peak activation bytes per frame, weight bytes) of the decoder in `dtype`."""
    e = torch.empty((), dtype=dtype, device="meta").element_size()
    with torch.device("meta"):
        net = HiggsDecoderNet(cfg)
    slot = sum(math.prod(s) * e for s in net.decoder_state_shapes().values())
    peak = [0]

    def hook(_m: torch.nn.Module, _i: object, out: object) -> None:
        if isinstance(out, torch.Tensor):
            peak[0] = max(peak[0], out.numel())

    handles = [m.register_forward_hook(hook) for m in net.acoustic_decoder.modules()]
    try:
        with torch.no_grad():
            net.acoustic_decoder(torch.zeros(1, cfg.acoustic_hidden, _PROBE_FRAMES, device="meta"))
    finally:
        for h in handles:
            h.remove()
    weights = sum(p.numel() for p in net.parameters()) * e
    return slot, 4 * e * -(-peak[0] // _PROBE_FRAMES), weights


def memory_needs(
    cfg: HiggsConfig, codec: HiggsCodecConfig, dtype: torch.dtype, codec_loaded: bool
) -> MemoryNeeds:
    e = torch.empty((), dtype=dtype, device="meta").element_size()
    kv_elems = cfg.num_key_value_heads * cfg.head_dim
    ffn = cfg.intermediate_size * (2 if cfg.dual_ffn else 1)
    per_token = e * (
        6 * cfg.hidden_size + 3 * ffn + (cfg.num_attention_heads + 2 * cfg.num_key_value_heads) * cfg.head_dim
    )
    slot, per_frame, weights = decoder_costs(codec, dtype)
    return MemoryNeeds(
        kv_bytes_per_position=2 * cfg.num_hidden_layers * kv_elems * e,
        codec_slot_bytes=slot,
        gather_bytes_per_position=2 * (kv_elems + cfg.num_attention_heads * cfg.head_dim) * e,
        prefill_bytes_per_token=per_token,
        prefill_bytes_per_token_pair=1 + e,
        decode_bytes_per_row=per_token + 2 * 4 * cfg.num_codebooks * cfg.codebook_size,
        codec_bytes_per_frame=per_frame,
        pending_weight_bytes=0 if codec_loaded else weights,
        extra_positions_per_row=cfg.num_codebooks + 1,
    )
