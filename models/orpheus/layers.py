"""Orpheus's LM: transformers' `LlamaForCausalLM` parameter names (`model.embed_tokens`, `model.layers.N.*`,
`model.norm`, `lm_head` unless tied) over the engine's paged KV pool. The decoder layer, llama3 RoPE and the
paged layout are the shared Llama ones (models/higgs_audio/layers.py without DualFFN, models/qwen3_tts'
`PagedBatch`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..higgs_audio.layers import DecoderLayer, Rotary
from ..norms import RMSNorm
from ..qwen3_tts.layers import PagedBatch
from .config import OrpheusConfig


class Backbone(nn.Module):
    def __init__(self, cfg: OrpheusConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))  # type: ignore[arg-type]
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)


class OrpheusWeights(nn.Module):
    def __init__(self, cfg: OrpheusConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.model = Backbone(cfg)
        if not cfg.tie_word_embeddings:
            self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.rotary = Rotary(cfg.head_dim, cfg.rope)  # type: ignore[arg-type]

    def forward_paged(self, ids: torch.Tensor, pb: PagedBatch, k_pools, v_pools) -> torch.Tensor:
        """ids [B, T] -> final-norm hidden [B, T, H]."""
        x = self.model.embed_tokens(ids)
        cos, sin = self.rotary(pb.q_pos, x.dtype)
        mask = pb.mask()
        for i, layer in enumerate(self.model.layers):
            x = layer(x, cos, sin, k_pools[i], v_pools[i], pb, mask, None)
        return self.model.norm(x)

    def head_weight(self) -> torch.Tensor:
        return self.model.embed_tokens.weight if self.cfg.tie_word_embeddings else self.lm_head.weight

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., H] -> [..., vocab] in fp32."""
        return F.linear(hidden, self.head_weight()).float()

    def logits_of(self, hidden: torch.Tensor, lo: int, hi: int) -> torch.Tensor:
        """hidden [H] -> the logits of tokens [lo, hi) only, fp32 (a step may pick only its band: 4096 rows of
        the 156,940-row head instead of all)."""
        return F.linear(hidden, self.head_weight()[lo:hi]).float()
