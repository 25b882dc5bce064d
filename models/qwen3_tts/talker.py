"""The talker: a Qwen3 decoder over summed codec/text embeddings that predicts codebook 0.

Module tree and parameter names follow the official checkpoint (`talker.model.layers.N...`,
`talker.text_projection.linear_fc1`, `talker.codec_head`, `talker.code_predictor...`), so the
checkpoint's state dict loads without renaming.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..layers import DecoderLayer, PagedBatch, RMSNorm, Rope, Rotary, run_layers_paged
from .config import TalkerConfig
from .predictor import CodePredictor


class TextProjection(nn.Module):
    """Text embedding width -> talker width: Linear -> SiLU -> Linear (both with bias)."""

    def __init__(self, text_hidden: int, hidden: int) -> None:
        super().__init__()
        self.linear_fc1 = nn.Linear(text_hidden, text_hidden, bias=True)
        self.linear_fc2 = nn.Linear(text_hidden, hidden, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_fc2(F.silu(self.linear_fc1(x)))


class TalkerBackbone(nn.Module):
    def __init__(self, cfg: TalkerConfig) -> None:
        super().__init__()
        b = cfg.block
        self.layers = nn.ModuleList(DecoderLayer(b) for _ in range(b.num_hidden_layers))
        self.norm = RMSNorm(b.hidden_size, b.rms_norm_eps)
        self.codec_embedding = nn.Embedding(cfg.vocab_size, b.hidden_size)
        self.text_embedding = nn.Embedding(cfg.text_vocab_size, cfg.text_hidden_size)


class Talker(nn.Module):
    def __init__(self, cfg: TalkerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.model = TalkerBackbone(cfg)
        self.text_projection = TextProjection(cfg.text_hidden_size, cfg.block.hidden_size)
        self.codec_head = nn.Linear(cfg.block.hidden_size, cfg.vocab_size, bias=False)
        self.code_predictor = CodePredictor(cfg.predictor, cfg.block.hidden_size)
        self.rotary = Rotary(cfg.block.head_dim, Rope(theta=cfg.block.rope_theta))

    # --- embeddings ---------------------------------------------------------------------------
    def text(self, ids: torch.Tensor) -> torch.Tensor:
        """P(text_embedding(ids)): [..., H]."""
        return self.text_projection(self.model.text_embedding(ids))

    def codec(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.codec_embedding(ids)

    # --- forward over the paged KV pool ---------------------------------------------------------
    def hidden_states(
        self, x: torch.Tensor, pb: PagedBatch, k_pools: torch.Tensor, v_pools: torch.Tensor
    ) -> torch.Tensor:
        """x [B, Tq, H] -> final-norm hidden [B, Tq, H]. k_pools/v_pools: [layers, pages, page, kvh, hd]."""
        return self.model.norm(run_layers_paged(self.model.layers, x, self.rotary, pb, k_pools, v_pools))


class Qwen3TTSWeights(nn.Module):
    """Root of the official state dict: `talker.*` plus, for Base checkpoints, `speaker_encoder.*`."""

    def __init__(self, cfg: TalkerConfig, speaker_encoder: nn.Module | None = None) -> None:
        super().__init__()
        self.talker = Talker(cfg)
        if speaker_encoder is not None:
            self.speaker_encoder = speaker_encoder
