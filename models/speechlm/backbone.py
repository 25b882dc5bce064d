"""The ParallelLLM backbones (Qwen3, OLMo-2, Llama) on the paged KV pool, with ESPnet's parameter names.

ESPnet's `build_parallel_hf_class` subclasses the HF causal LM named by the backbone's config.json and
replaces its embedding and LM head with ones over the whole unified vocabulary; it adds `stream_emb`
(one vector per stream, stream 0's forced to zero) and the `vocab_weight` buffer (training loss weights,
kept so the state dict loads strictly). One step:

    x_t      = embed(tok_t[0]) + sum_{s >= 1, tok_t[s] != 0} embed(tok_t[s])  (a pad on streams >= 1: nothing)
    h_t      = decoder(x_<=t)                                                     (final norm included)
    logits_s = lm_head(h_t + e_s)                                                 (e_0 = 0)

The Qwen3 and Llama blocks are the layer library's (models/layers; Llama without q/k norm); OLMo-2 differs
in its norms (q/k RMS-normed over all heads before the head split; norms after attention and MLP instead
of before), kept here.
"""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from ..layers import (
    Attention,
    BlockConfig,
    DecoderLayer,
    DecoderStack,
    PagedBatch,
    RMSNorm,
    Rope,
    Rotary,
    SwiGLU,
    apply_rope,
)
from .config import Backbone


class OlmoAttention(Attention):
    """OLMo-2: q_norm / k_norm over the whole projection (all heads), then the head split and RoPE."""

    def __init__(self, cfg: BlockConfig) -> None:
        super().__init__(cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim,
                         qk_norm=False, bias=cfg.attention_bias)
        self.q_norm = RMSNorm(self.heads * self.head_dim, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(self.kv_heads * self.head_dim, cfg.rms_norm_eps)

    def project(self, x: torch.Tensor, cos: torch.Tensor,
                sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        shape = (*x.shape[:-1], -1, self.head_dim)
        q = apply_rope(self.q_norm(self.q_proj(x)).view(shape), cos, sin)
        k = apply_rope(self.k_norm(self.k_proj(x)).view(shape), cos, sin)
        return q, k, self.v_proj(x).view(shape)


class OlmoLayer(nn.Module):
    """OLMo-2's block: the norms come after attention and after the MLP, not before."""

    def __init__(self, cfg: BlockConfig) -> None:
        super().__init__()
        self.self_attn = OlmoAttention(cfg)
        self.mlp = SwiGLU(cfg.hidden_size, cfg.intermediate_size)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_feedforward_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, k_pool: torch.Tensor,
                v_pool: torch.Tensor, pb: PagedBatch, mask: torch.Tensor) -> torch.Tensor:
        a = self.self_attn.forward_paged(x, cos, sin, k_pool, v_pool, pb, mask)
        h = x + self.post_attention_layernorm(a)
        return h + self.post_feedforward_layernorm(self.mlp(h))


def llama_layer(cfg: BlockConfig) -> DecoderLayer:
    """Llama (SmolLM2): the Qwen3 block without q/k norm."""
    return DecoderLayer(replace(cfg, qk_norm=False))


LAYERS = {"qwen3": DecoderLayer, "olmo2": OlmoLayer, "llama": llama_layer}


class ParallelLM(nn.Module):
    """Root of ESPnet's state dict: `model.*`, `lm_head`, `stream_emb`, `vocab_weight`."""

    def __init__(self, b: Backbone, vocab_size: int, num_stream: int) -> None:
        super().__init__()
        self.backbone = b
        self.model = DecoderStack(b.block, vocab_size, LAYERS[b.arch])
        self.lm_head = nn.Linear(b.block.hidden_size, vocab_size, bias=False)
        self.stream_emb = nn.Embedding(num_stream, b.block.hidden_size)
        self.register_buffer("vocab_weight", torch.ones(vocab_size))
        self.rotary = Rotary(b.block.head_dim, Rope(theta=b.block.rope_theta))

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [..., S] -> summed embedding [..., H]; a 0 (pad) on streams >= 1 adds nothing."""
        e = self.model.embed_tokens(tokens)
        keep = torch.ones_like(tokens, dtype=torch.bool)
        keep[..., 1:] = tokens[..., 1:] != 0
        return (e * keep.unsqueeze(-1).to(e.dtype)).sum(dim=-2)

    def hidden_states(self, x: torch.Tensor, pb: PagedBatch, k_pools: torch.Tensor,
                      v_pools: torch.Tensor) -> torch.Tensor:
        """x [B, T, H] -> final-norm hidden [B, T, H]; K/V written to and read from the pools."""
        return self.model.forward_hidden(x, self.rotary, pb, k_pools, v_pools)

    def stream_logits(self, h: torch.Tensor) -> torch.Tensor:
        """h [..., H] -> logits [..., S, V] in float32: W_H(h + e_s), e_0 = 0."""
        e = self.stream_emb.weight.clone()
        e[0] = 0.0
        return self.lm_head(h.unsqueeze(-2) + e.to(h.dtype)).float()
