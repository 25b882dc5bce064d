"""Code predictor (depth transformer): turns (h_t, c0_t) into the 15 residual codes of frame t.

Every frame starts a fresh 17-position cache: positions 0-1 are proj(h_t) and proj(codec_emb[c0_t]),
then each sampled code is fed back through its group's embedding. All rows of a decode batch run
together; the loop over the 15 code groups is inherent to the model (each depends on the previous).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from ..layers import DecoderLayer, DenseCache, RMSNorm, Rope, Rotary, run_layers_dense
from .config import PredictorConfig

# pick(group_index, logits [B, V]) -> codes [B]; the sampler decides greedy vs sampling per row.
Picker = Callable[[int, torch.Tensor], torch.Tensor]


class PredictorBackbone(nn.Module):
    def __init__(self, cfg: PredictorConfig, talker_hidden: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(cfg.block) for _ in range(cfg.block.num_hidden_layers))
        self.norm = RMSNorm(cfg.block.hidden_size, cfg.block.rms_norm_eps)
        # Embeddings live in the *talker* width; the projection maps them down when widths differ.
        self.codec_embedding = nn.ModuleList(
            nn.Embedding(cfg.vocab_size, talker_hidden) for _ in range(cfg.num_code_groups - 1)
        )


class CodePredictor(nn.Module):
    def __init__(self, cfg: PredictorConfig, talker_hidden: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.model = PredictorBackbone(cfg, talker_hidden)
        self.lm_head = nn.ModuleList(
            nn.Linear(cfg.block.hidden_size, cfg.vocab_size, bias=False)
            for _ in range(cfg.num_code_groups - 1)
        )
        if cfg.block.hidden_size != talker_hidden:
            self.small_to_mtp_projection: nn.Module = nn.Linear(
                talker_hidden, cfg.block.hidden_size, bias=True
            )
        else:
            self.small_to_mtp_projection = nn.Identity()
        self.rotary = Rotary(cfg.block.head_dim, Rope(theta=cfg.block.rope_theta))

    @property
    def groups(self) -> int:
        return self.cfg.num_code_groups - 1

    def _run(self, x: torch.Tensor, cache: DenseCache) -> torch.Tensor:
        return self.model.norm(run_layers_dense(self.model.layers, x, self.rotary, cache))

    def _cache(self) -> DenseCache:
        return DenseCache(len(self.model.layers))

    def generate(self, h: torch.Tensor, c0_embed: torch.Tensor, pick: Picker) -> torch.Tensor:
        """h, c0_embed: [B, H_talker] -> residual codes [B, 15] (int64)."""
        x = self.small_to_mtp_projection(torch.stack([h, c0_embed], dim=1))
        cache = self._cache()
        hid = self._run(x, cache)
        codes = [pick(0, self.lm_head[0](hid[:, -1]))]
        for g in range(1, self.groups):
            x = self.small_to_mtp_projection(self.model.codec_embedding[g - 1](codes[-1])[:, None])
            hid = self._run(x, cache)
            codes.append(pick(g, self.lm_head[g](hid[:, -1])))
        return torch.stack(codes, dim=1)

    def teacher_forced_logits(
        self, h: torch.Tensor, c0_embed: torch.Tensor, codes: torch.Tensor
    ) -> torch.Tensor:
        """Logits of every group given the true codes [B, 15]: [B, 15, V] (one full causal pass)."""
        rest = [self.model.codec_embedding[g](codes[:, g]) for g in range(self.groups - 1)]
        x = self.small_to_mtp_projection(torch.stack([h, c0_embed, *rest], dim=1))
        hid = self._run(x, self._cache())
        return torch.stack([self.lm_head[g](hid[:, g + 1]) for g in range(self.groups)], dim=1)

    def embed_frame_sum(self, c0_embed: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
        """Sum of all 16 codebook embeddings of a frame [B, H]; stacked then summed like the reference
        (`torch.cat(...).sum(1)`) so the result is bit-identical (summation order matters)."""
        parts = [c0_embed] + [self.model.codec_embedding[g](codes[:, g]) for g in range(self.groups)]
        return torch.stack(parts, dim=1).sum(1)
