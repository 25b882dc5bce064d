"""The pre-norm decoder block of Llama / Qwen2 / Qwen3 (`self_attn`, `mlp`, `input_layernorm`,
`post_attention_layernorm`) and the dimensions it is built from."""

from __future__ import annotations

from typing import Protocol

import torch
from torch import nn

from .attention import Attention
from .config import BlockConfig
from .dense_cache import DenseCache
from .mlp import SwiGLU
from .norms import RMSNorm
from .paged import PagedBatch


class DecoderLayer(nn.Module):
    def __init__(self, cfg: BlockConfig) -> None:
        super().__init__()
        self.self_attn = Attention(
            cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim,
            eps=cfg.rms_norm_eps, qk_norm=cfg.qk_norm, bias=cfg.attention_bias, out_bias=cfg.output_bias,
        )
        self.mlp = SwiGLU(cfg.hidden_size, cfg.intermediate_size)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def _mlp(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.mlp(self.post_attention_layernorm(h))

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, k_pool: torch.Tensor,
                v_pool: torch.Tensor, pb: PagedBatch, mask: torch.Tensor) -> torch.Tensor:
        """The block over the paged pool."""
        h = x + self.self_attn.forward_paged(self.input_layernorm(x), cos, sin, k_pool, v_pool, pb, mask)
        return self._mlp(h)

    def forward_dense(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: DenseCache,
                      layer: int) -> torch.Tensor:
        """The block as layer `layer` of a depth decoder, over its dense per-frame cache."""
        return self._mlp(x + self.self_attn.forward_dense(self.input_layernorm(x), cos, sin, cache, layer))


class LlamaDims(Protocol):
    """The config.json fields of a Llama-style decoder (transformers' names; Orpheus, Higgs Audio)."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    attention_bias: bool
    max_position_embeddings: int


def llama_block(c: LlamaDims, *, qk_norm: bool = False) -> BlockConfig:
    """Llama's block (no q/k norm); `qk_norm` makes it Qwen3's (Higgs Audio v3)."""
    return BlockConfig(
        hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
        num_hidden_layers=c.num_hidden_layers, num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads, head_dim=c.head_dim, rms_norm_eps=c.rms_norm_eps,
        attention_bias=c.attention_bias, max_position_embeddings=c.max_position_embeddings,
        qk_norm=qk_norm,
    )


class Qwen2Dims(Protocol):
    """The config.json fields of a Qwen2 decoder (CosyVoice 3's LM, VibeVoice's language model)."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int

    @property
    def head_dim(self) -> int: ...


def qwen2_block(c: Qwen2Dims) -> BlockConfig:
    """Qwen2's block: biased q/k/v, an unbiased o_proj, no q/k norm."""
    return BlockConfig(
        hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
        num_hidden_layers=c.num_hidden_layers, num_attention_heads=c.num_attention_heads,
        num_key_value_heads=c.num_key_value_heads, head_dim=c.head_dim, rms_norm_eps=c.rms_norm_eps,
        rope_theta=c.rope_theta, attention_bias=True, output_bias=False,
        max_position_embeddings=c.max_position_embeddings, qk_norm=False,
    )
