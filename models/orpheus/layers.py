"""Orpheus's LM: transformers' `LlamaForCausalLM` parameter names (`model.embed_tokens`, `model.layers.N.*`,
`model.norm`, `lm_head` unless tied) over the engine's paged KV pool. The decoder layer (Llama: no q/k norm),
llama3 RoPE and the paged layout are the layer library's (models/layers)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..layers import DecoderStack, PagedBatch, Rotary, llama_block
from .config import OrpheusConfig


class OrpheusWeights(nn.Module):
    def __init__(self, cfg: OrpheusConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.model = DecoderStack(llama_block(cfg), cfg.vocab_size)
        if not cfg.tie_word_embeddings:
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.rotary = Rotary(cfg.head_dim, cfg.rope)

    def hidden_states(self, ids: torch.Tensor, pb: PagedBatch, k_pools, v_pools) -> torch.Tensor:
        """ids [B, T] -> final-norm hidden [B, T, H]."""
        return self.model.forward_hidden(self.model.embed_tokens(ids), self.rotary, pb, k_pools, v_pools)

    def head_weight(self) -> torch.Tensor:
        return self.model.embed_tokens.weight if self.cfg.tie_word_embeddings else self.lm_head.weight

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., H] -> [..., vocab] in fp32."""
        return F.linear(hidden, self.head_weight()).float()

    def logits_of(self, hidden: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
        """hidden [H] -> the logits of tokens [lo, hi) only, fp32 (a step may pick only its band: 4096 rows of
        the 156,940-row head instead of all)."""
        return F.linear(hidden, self.head_weight()[lo:hi]).float()
