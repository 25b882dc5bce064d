"""CSM's two Llama stacks in plain PyTorch under transformers' parameter names (`backbone_model.*`,
`depth_decoder.*`, `embed_text_tokens`, `lm_head`; the codec's `codec_model.*` load into models/mimi).

* The backbone runs on the engine's paged KV pool (`PagedBatch`, as every family's LM): a position is a
  text token (`embed_text_tokens`) or an audio frame (the K codebooks' embeddings summed, codebook k's ids
  offset by k * vocab_size); `lm_head` gives codebook 0.
* The depth decoder runs inside a decode step with a fresh dense cache per frame: position 0 is the
  backbone's last (normed) hidden state, position 1 codebook 0's embedding, position g + 1 codebook g's;
  its inputs are embedded in the backbone's width and projected down; head g (`codebooks_head.weight[g]`)
  gives codebook g + 1.
The blocks, RoPE (llama3-scaled half-split, fp32 tables) and both caches are the layer library's.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..layers import (
    BlockConfig,
    DecoderLayer,
    DenseCache,
    PagedBatch,
    RMSNorm,
    Rotary,
    run_layers_dense,
    run_layers_paged,
)
from .config import Block, CsmConfig


def block_config(b: Block) -> BlockConfig:
    """A CSM stack as the layer library's Llama block (no q/k norm, no biases)."""
    return BlockConfig(
        hidden_size=b.hidden_size, intermediate_size=b.intermediate_size, num_hidden_layers=b.num_layers,
        num_attention_heads=b.num_heads, num_key_value_heads=b.num_kv_heads, head_dim=b.head_dim,
        rms_norm_eps=b.rms_norm_eps, max_position_embeddings=b.max_position_embeddings, qk_norm=False,
    )


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
        block = block_config(cfg.backbone)
        self.layers = nn.ModuleList(DecoderLayer(block) for _ in range(cfg.backbone.num_layers))
        self.norm = RMSNorm(cfg.backbone.hidden_size, cfg.backbone.rms_norm_eps)


class DepthModel(nn.Module):
    def __init__(self, cfg: CsmConfig) -> None:
        super().__init__()
        d = cfg.depth
        self.embed_tokens = nn.Embedding(cfg.num_codebooks * cfg.vocab_size, cfg.backbone.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(block_config(d)) for _ in range(d.num_layers))
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

    def hidden_states(self, x: torch.Tensor, pb: PagedBatch, k_pools, v_pools) -> torch.Tensor:
        """x [B, T, H] -> the final-norm hidden [B, T, H], K/V written into each row's pages."""
        bm = self.backbone_model
        return bm.norm(run_layers_paged(bm.layers, x, self.rotary, pb, k_pools, v_pools))

    def _depth_run(self, x: torch.Tensor, cache: DenseCache) -> torch.Tensor:
        """Depth-decoder inputs [B, T, H] after the cache's positions -> final-norm hidden [B, T, Hd]."""
        dm = self.depth_decoder.model
        x = dm.inputs_embeds_projector(x)
        return dm.norm(run_layers_dense(dm.layers, x, self.depth_rotary, cache))

    def depth_logits(self, hid: torch.Tensor, g: int) -> torch.Tensor:
        """Head g over the depth decoder's hidden [B, Hd] -> logits [B, V] of codebook g + 1."""
        return F.linear(hid, self.depth_decoder.codebooks_head.weight[g].T)

    def depth_generate(self, h: torch.Tensor, c0: torch.Tensor, pick) -> torch.Tensor:
        """h [B, H] (the backbone's last hidden), c0 [B] -> codebooks 1..K-1 [B, K-1];
        `pick(g, logits [B, V])`
        chooses codebook g + 1 (greedy or sampled per row)."""
        V, table = self.cfg.vocab_size, self.depth_decoder.model.embed_tokens
        cache = DenseCache(len(self.depth_decoder.model.layers))  # this frame's positions only
        hid = self._depth_run(torch.stack([h, table(c0)], dim=1), cache)
        codes = [pick(0, self.depth_logits(hid[:, -1], 0))]
        for g in range(1, self.cfg.num_codebooks - 1):
            hid = self._depth_run(table(codes[-1] + g * V)[:, None], cache)
            codes.append(pick(g, self.depth_logits(hid[:, -1], g)))
        return torch.stack(codes, dim=1)
