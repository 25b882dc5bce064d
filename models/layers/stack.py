"""A backbone over the paged pool: the pass (one rotary table and one mask for the batch, then every
layer) and the embedding / layers / final norm module most causal LMs name `model`; and a depth decoder's
pass over its per-frame dense cache."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch
from torch import nn

from .block import BlockConfig, DecoderLayer
from .dense_cache import DenseCache
from .norms import RMSNorm
from .paged import PagedBatch

RotaryTables = Callable[[torch.Tensor, torch.dtype], tuple[torch.Tensor, torch.Tensor]]


def run_layers_paged(layers: Iterable[nn.Module], x: torch.Tensor, rotary: RotaryTables, pb: PagedBatch,
                     k_pools: torch.Tensor, v_pools: torch.Tensor) -> torch.Tensor:
    """x [B, Tq, H] through `layers` (each called as layer(x, cos, sin, k_pool, v_pool, pb, mask)), layer
    i on pools k_pools[i] / v_pools[i] -> [B, Tq, H] (before the final norm)."""
    cos, sin = rotary(pb.q_pos, x.dtype)
    mask = pb.mask()
    for i, layer in enumerate(layers):
        x = layer(x, cos, sin, k_pools[i], v_pools[i], pb, mask)
    return x


def run_layers_dense(layers: Iterable[DecoderLayer], x: torch.Tensor, rotary: RotaryTables,
                     cache: DenseCache) -> torch.Tensor:
    """x [B, T, H], the positions after the cache's, through a depth decoder's `layers` (layer i on the
    cache's layer i) -> [B, T, H] (before the final norm); the cache grows by T."""
    start = cache.length
    cos, sin = rotary(torch.arange(start, start + x.shape[1], device=x.device), x.dtype)
    for i, layer in enumerate(layers):
        x = layer.forward_dense(x, cos, sin, cache, i)
    return x


class DecoderStack(nn.Module):
    """`embed_tokens`, `layers`, `norm`: the `model.*` of a transformers causal LM (Llama, Qwen2, ...)."""

    def __init__(self, cfg: BlockConfig, vocab_size: int,
                 layer: Callable[[BlockConfig], nn.Module] = DecoderLayer) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(layer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward_hidden(self, x: torch.Tensor, rotary: RotaryTables, pb: PagedBatch, k_pools: torch.Tensor,
                       v_pools: torch.Tensor) -> torch.Tensor:
        """Embedded inputs [B, Tq, H] -> final-norm hidden [B, Tq, H], K/V written into the rows' pages."""
        return self.norm(run_layers_paged(self.layers, x, rotary, pb, k_pools, v_pools))
