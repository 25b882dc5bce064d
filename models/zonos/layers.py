"""Zonos' transformer backbone, code embeddings and the nine heads, in plain PyTorch with the checkpoint's
parameter names (`backbone.layers.<i>.{norm,mixer.in_proj,mixer.out_proj,norm2,mlp.fc1,mlp.fc2}`,
`backbone.norm_f`, `embeddings.<k>`, `heads.<k>`, `prefix_conditioner.*`).

Facts of the reference implementation kept here: pre-LayerNorm blocks; one fused `in_proj` giving q, then
k, then v (grouped-query attention); RoPE on interleaved pairs (x[2i], x[2i+1]) with base 10000 computed in
float32 whatever the model dtype; scaled dot-product attention with the usual 1/sqrt(head_dim); the MLP's
`fc1` gives (value, gate) in that order and multiplies value by silu(gate); a final LayerNorm; the nine
code embeddings are summed; the heads predict 1025 classes (1024 codes + EOS), padded to 1026 as the
reference pads them on load (the pad column is never chosen).

Attention reads and writes the engine's paged KV pool `[layers, pages, page_size, kv_heads, head_dim]`
through the layer library's `paged_attention` (`PagedBatch` says where each sequence's positions live); the
fused projection and the LayerNorm blocks stay Zonos' own; the interleaved rotary is the library's.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..layers import PagedBatch, apply_rope_interleaved, interleaved_tables, paged_attention
from .conditioning import PrefixConditioner
from .config import CODE_VOCAB, CODEBOOKS, HEAD_VOCAB, Backbone, ZonosConfig


class Attention(nn.Module):
    def __init__(self, b: Backbone) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = b.num_heads, b.num_heads_kv, b.head_dim
        self.in_proj = nn.Linear(b.d_model, (b.num_heads + 2 * b.num_heads_kv) * b.head_dim, bias=False)
        self.out_proj = nn.Linear(b.num_heads * b.head_dim, b.d_model, bias=False)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        k_pool: torch.Tensor,
        v_pool: torch.Tensor,
        pb: PagedBatch,
        mask: torch.Tensor,
    ) -> torch.Tensor:
        S, T, _ = x.shape
        hd = self.head_dim
        q, k, v = self.in_proj(x).split([self.heads * hd, self.kv_heads * hd, self.kv_heads * hd], dim=-1)
        # cos/sin [S, T, hd/2] gain the head axis here
        q = apply_rope_interleaved(q.view(S, T, self.heads, hd), cos[:, :, None], sin[:, :, None])
        k = apply_rope_interleaved(k.view(S, T, self.kv_heads, hd), cos[:, :, None], sin[:, :, None])
        v = v.view(S, T, self.kv_heads, hd)
        return self.out_proj(paged_attention(q, k, v, k_pool, v_pool, pb, mask))


class FeedForward(nn.Module):
    def __init__(self, b: Backbone) -> None:
        super().__init__()
        self.fc1 = nn.Linear(b.d_model, 2 * b.mlp, bias=False)
        self.fc2 = nn.Linear(b.mlp, b.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        value, gate = self.fc1(x).chunk(2, dim=-1)
        return self.fc2(value * F.silu(gate))


class Block(nn.Module):
    def __init__(self, b: Backbone) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(b.d_model, eps=b.norm_epsilon)
        self.mixer = Attention(b)
        self.norm2 = nn.LayerNorm(b.d_model, eps=b.norm_epsilon)
        self.mlp = FeedForward(b)


class TransformerBackbone(nn.Module):
    def __init__(self, b: Backbone) -> None:
        super().__init__()
        self.cfg = b
        self.layers = nn.ModuleList(Block(b) for _ in range(b.n_layer))
        self.norm_f = nn.LayerNorm(b.d_model, eps=b.norm_epsilon)

    def forward(
        self, x: torch.Tensor, k_pool: torch.Tensor, v_pool: torch.Tensor, pb: PagedBatch
    ) -> torch.Tensor:
        cos, sin = interleaved_tables(pb.q_pos, self.cfg.head_dim)  # base 10000, fp32
        mask = pb.mask()
        for i, layer in enumerate(self.layers):
            x = x + layer.mixer(layer.norm(x), cos, sin, k_pool[i], v_pool[i], pb, mask)
            x = x + layer.mlp(layer.norm2(x))
        return self.norm_f(x)


class ZonosWeights(nn.Module):
    """Everything config.json + model.safetensors describe (the DAC codec is loaded on its own)."""

    def __init__(self, cfg: ZonosConfig) -> None:
        super().__init__()
        d = cfg.backbone.d_model
        self.backbone = TransformerBackbone(cfg.backbone)
        self.prefix_conditioner = PrefixConditioner(cfg, d)
        self.embeddings = nn.ModuleList(nn.Embedding(CODE_VOCAB, d) for _ in range(CODEBOOKS))
        self.heads = nn.ModuleList(nn.Linear(d, HEAD_VOCAB, bias=False) for _ in range(CODEBOOKS))

    def embed_codes(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [..., 9] -> summed embeddings [..., d_model]."""
        out = self.embeddings[0](codes[..., 0])
        for k in range(1, CODEBOOKS):
            out = out + self.embeddings[k](codes[..., k])
        return out

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden [S, d] -> float32 logits [S, 9, 1026]; the pad column is -inf."""
        out = torch.stack([head(hidden) for head in self.heads], dim=1).float()
        return F.pad(out, (0, CODE_VOCAB - HEAD_VOCAB), value=-torch.inf)
