"""CSM's two Llama stacks in plain PyTorch under transformers' parameter names (`backbone_model.*`,
`depth_decoder.*`, `embed_text_tokens`, `lm_head`; the codec's `codec_model.*` load into models/mimi).

* The backbone runs on the engine's paged KV pool (`PagedBatch`, as every family's LM): a position is a
  text token (`embed_text_tokens`) or an audio frame (the K codebooks' embeddings summed, codebook k's ids
  offset by k * vocab_size); `lm_head` gives codebook 0.
* The depth decoder runs inside a decode step with a fresh dense cache per frame: position 0 is the
  backbone's last (normed) hidden state, position 1 codebook 0's embedding, position g + 1 codebook g's;
  its inputs are embedded in the backbone's width and projected down; head g (`codebooks_head.weight[g]`)
  gives codebook g + 1. RoPE is llama3-scaled half-split with fp32 tables (higgs_audio/layers.py's).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..higgs_audio.layers import Rotary
from ..norms import RMSNorm
from ..qwen3_tts.layers import PagedBatch, SwiGLU, apply_rope
from .config import Block, CsmConfig


class Attention(nn.Module):
    def __init__(self, b: Block) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = b.num_heads, b.num_kv_heads, b.head_dim
        self.q_proj = nn.Linear(b.hidden_size, b.num_heads * b.head_dim, bias=False)
        self.k_proj = nn.Linear(b.hidden_size, b.num_kv_heads * b.head_dim, bias=False)
        self.v_proj = nn.Linear(b.hidden_size, b.num_kv_heads * b.head_dim, bias=False)
        self.o_proj = nn.Linear(b.num_heads * b.head_dim, b.hidden_size, bias=False)

    def _qkv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        shape = (*x.shape[:-1], -1, self.head_dim)
        q = apply_rope(self.q_proj(x).view(shape), cos, sin)
        k = apply_rope(self.k_proj(x).view(shape), cos, sin)
        return q, k, self.v_proj(x).view(shape)  # [B, T, heads, hd]

    def _attend(self, q, k, v, mask, causal: bool = False) -> torch.Tensor:
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        out = F.scaled_dot_product_attention(
            q,
            k.to(q.dtype),
            v.to(q.dtype),
            attn_mask=mask,
            is_causal=causal,
            enable_gqa=self.heads != self.kv_heads,
        )
        return self.o_proj(out.transpose(1, 2).reshape(out.shape[0], out.shape[2], -1))

    def forward_paged(self, x, cos, sin, k_pool, v_pool, pb: PagedBatch, mask) -> torch.Tensor:
        q, k, v = self._qkv(x, cos, sin)
        flat_k = k_pool.view(-1, self.kv_heads, self.head_dim)
        flat_v = v_pool.view(-1, self.kv_heads, self.head_dim)
        valid = pb.slots >= 0
        idx = pb.slots[valid]
        flat_k[idx] = k[valid].to(flat_k.dtype)
        flat_v[idx] = v[valid].to(flat_v.dtype)
        B, P = pb.block_table.shape
        keys = k_pool[pb.block_table].view(B, P * pb.page_size, self.kv_heads, self.head_dim)
        vals = v_pool[pb.block_table].view(B, P * pb.page_size, self.kv_heads, self.head_dim)
        return self._attend(q, keys, vals, mask)

    def forward_dense(self, x, cos, sin, cache: list[torch.Tensor] | None):
        q, k, v = self._qkv(x, cos, sin)
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=1), torch.cat([cache[1], v], dim=1)
        return self._attend(q, k, v, None, causal=q.shape[1] > 1), [k, v]


class Layer(nn.Module):
    def __init__(self, b: Block) -> None:
        super().__init__()
        self.self_attn = Attention(b)
        self.mlp = SwiGLU(b.hidden_size, b.intermediate_size)
        self.input_layernorm = RMSNorm(b.hidden_size, b.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(b.hidden_size, b.rms_norm_eps)

    def _mlp(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.mlp(self.post_attention_layernorm(h))

    def forward_paged(self, x, cos, sin, k_pool, v_pool, pb: PagedBatch, mask) -> torch.Tensor:
        return self._mlp(
            x + self.self_attn.forward_paged(self.input_layernorm(x), cos, sin, k_pool, v_pool, pb, mask)
        )

    def forward_dense(self, x, cos, sin, cache):
        a, cache = self.self_attn.forward_dense(self.input_layernorm(x), cos, sin, cache)
        return self._mlp(x + a), cache


class AudioEmbedding(nn.Module):
    """`embed_audio_tokens`: one table for all codebooks; a frame embeds as the sum of its K rows. Tied
    (`tie_codebooks_embeddings`, the release): the depth decoder's `embed_tokens` is the table (transformers
    ties the backbone's to it), held here by reference so it is neither loaded nor stored twice."""

    def __init__(self, cfg: CsmConfig, shared: nn.Embedding | None) -> None:
        super().__init__()
        if shared is None:
            self.embed_audio_tokens = nn.Embedding(
                cfg.num_codebooks * cfg.vocab_size, cfg.backbone.hidden_size
            )
        self._shared = [shared]  # a list: not a submodule, so not in the state dict
        self.vocab = cfg.vocab_size

    @property
    def table(self) -> nn.Embedding:
        return self._shared[0] if self._shared[0] is not None else self.embed_audio_tokens

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        """frames [..., K] -> [..., H] (gathered, then summed as the reference: sum order matters)."""
        off = torch.arange(frames.shape[-1], device=frames.device) * self.vocab
        return self.table(frames + off).sum(dim=-2)


class Backbone(nn.Module):
    def __init__(self, cfg: CsmConfig, shared: nn.Embedding | None) -> None:
        super().__init__()
        self.embed_tokens = AudioEmbedding(cfg, shared)
        self.layers = nn.ModuleList(Layer(cfg.backbone) for _ in range(cfg.backbone.num_layers))
        self.norm = RMSNorm(cfg.backbone.hidden_size, cfg.backbone.rms_norm_eps)


class DepthModel(nn.Module):
    def __init__(self, cfg: CsmConfig) -> None:
        super().__init__()
        d = cfg.depth
        self.embed_tokens = nn.Embedding(cfg.num_codebooks * cfg.vocab_size, cfg.backbone.hidden_size)
        self.layers = nn.ModuleList(Layer(d) for _ in range(d.num_layers))
        self.norm = RMSNorm(d.hidden_size, d.rms_norm_eps)
        self.inputs_embeds_projector = nn.Linear(cfg.backbone.hidden_size, d.hidden_size, bias=False)


class CodebooksHead(nn.Module):
    def __init__(self, cfg: CsmConfig) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(cfg.num_codebooks - 1, cfg.depth.hidden_size, cfg.vocab_size))


class DepthDecoder(nn.Module):
    def __init__(self, cfg: CsmConfig) -> None:
        super().__init__()
        self.model = DepthModel(cfg)
        self.codebooks_head = CodebooksHead(cfg)


class CsmWeights(nn.Module):
    """Everything but the codec: `backbone_model`, `depth_decoder`, `embed_text_tokens`, `lm_head`."""

    def __init__(self, cfg: CsmConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.depth_decoder = DepthDecoder(cfg)
        tied = self.depth_decoder.model.embed_tokens if cfg.tie_codebooks_embeddings else None
        self.backbone_model = Backbone(cfg, tied)
        self.embed_text_tokens = nn.Embedding(cfg.text_vocab_size, cfg.backbone.hidden_size)
        self.lm_head = nn.Linear(cfg.backbone.hidden_size, cfg.vocab_size, bias=False)
        self.rotary = Rotary(cfg.backbone.head_dim, cfg.backbone.rope)
        self.depth_rotary = Rotary(cfg.depth.head_dim, cfg.depth.rope)

    def embed_frames(self, frames: torch.Tensor) -> torch.Tensor:
        return self.backbone_model.embed_tokens(frames)

    def forward_paged(self, x: torch.Tensor, pb: PagedBatch, k_pools, v_pools) -> torch.Tensor:
        """x [B, T, H] -> the final-norm hidden [B, T, H], K/V written into each row's pages."""
        cos, sin = self.rotary(pb.q_pos, x.dtype)
        mask = pb.mask()
        for i, layer in enumerate(self.backbone_model.layers):
            x = layer.forward_paged(x, cos, sin, k_pools[i], v_pools[i], pb, mask)
        return self.backbone_model.norm(x)

    def _depth_run(self, x: torch.Tensor, start: int, caches: list | None) -> tuple[torch.Tensor, list]:
        pos = torch.arange(start, start + x.shape[1], device=x.device)
        cos, sin = self.depth_rotary(pos, x.dtype)
        dm = self.depth_decoder.model
        x = dm.inputs_embeds_projector(x)
        new = []
        for i, layer in enumerate(dm.layers):
            x, c = layer.forward_dense(x, cos, sin, None if caches is None else caches[i])
            new.append(c)
        return dm.norm(x), new

    def depth_logits(self, hid: torch.Tensor, g: int) -> torch.Tensor:
        """Head g over the depth decoder's hidden [B, Hd] -> logits [B, V] of codebook g + 1."""
        return F.linear(hid, self.depth_decoder.codebooks_head.weight[g].T)

    def depth_generate(self, h: torch.Tensor, c0: torch.Tensor, pick) -> torch.Tensor:
        """h [B, H] (the backbone's last hidden), c0 [B] -> codebooks 1..K-1 [B, K-1];
        `pick(g, logits [B, V])`
        chooses codebook g + 1 (greedy or sampled per row)."""
        V, table = self.cfg.vocab_size, self.depth_decoder.model.embed_tokens
        x = torch.stack([h, table(c0)], dim=1)
        hid, caches = self._depth_run(x, 0, None)
        codes = [pick(0, self.depth_logits(hid[:, -1], 0))]
        for g in range(1, self.cfg.num_codebooks - 1):
            hid, caches = self._depth_run(table(codes[-1] + g * V)[:, None], g + 1, caches)
            codes.append(pick(g, self.depth_logits(hid[:, -1], g)))
        return torch.stack(codes, dim=1)
