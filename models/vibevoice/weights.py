"""VibeVoice's networks under the checkpoint's own names (`model.language_model.*`, `model.audio_tower.
decoder.*`, `model.semantic_tokenizer_encoder.*`, `model.diffusion_head.*`, the two connectors, the latent's
scale and bias, `lm_head` when it is not tied), and the LM's forward over the engine's paged KV pool.

The acoustic tokenizer's encoder (`model.audio_tower.encoder.*`) encodes voice samples; it is not read
(generation never runs it for a text-only prompt), so loading skips it.
"""

from __future__ import annotations

import torch
from torch import nn

from ..layers import DecoderStack, PagedBatch, Rope, Rotary, qwen2_block
from .codec import Decoder, Encoder
from .config import VibeVoiceConfig
from .head import Connector, DiffusionHead

SKIPPED = ("model.audio_tower.encoder.",)


class AudioTower(nn.Module):
    def __init__(self, cfg: VibeVoiceConfig) -> None:
        super().__init__()
        self.decoder = Decoder(cfg.acoustic)


class Inner(nn.Module):
    def __init__(self, cfg: VibeVoiceConfig) -> None:
        super().__init__()
        H = cfg.text.hidden_size
        self.language_model = DecoderStack(qwen2_block(cfg.text), cfg.text.vocab_size)
        self.audio_tower = AudioTower(cfg)
        self.semantic_tokenizer_encoder = Encoder(cfg.semantic)
        self.multi_modal_projector = Connector(cfg.acoustic.hidden_size, H)
        self.semantic_connector = Connector(cfg.semantic.hidden_size, H)
        self.diffusion_head = DiffusionHead(cfg.head)
        self.latent_scaling_factor = nn.Parameter(torch.tensor(1.0))
        self.latent_bias_factor = nn.Parameter(torch.tensor(0.0))


class VibeVoiceWeights(nn.Module):
    def __init__(self, cfg: VibeVoiceConfig, own_lm_head: bool) -> None:
        super().__init__()
        self.cfg = cfg
        self.model = Inner(cfg)
        if own_lm_head:
            self.lm_head = nn.Linear(cfg.text.hidden_size, cfg.text.vocab_size, bias=False)
        head_dim = cfg.text.hidden_size // cfg.text.num_attention_heads
        self.rotary = Rotary(head_dim, Rope(theta=cfg.text.rope_theta))

    @property
    def lm(self) -> DecoderStack:
        return self.model.language_model

    def choice_rows(self) -> torch.Tensor:
        """[4, H]: the LM head's rows of the four tokens generate() may pick (the others are masked to
        -inf, and the guidance's log-softmax constants are equal across tokens, so only these decide)."""
        w = self.lm_head.weight if hasattr(self, "lm_head") else self.lm.embed_tokens.weight
        return w[list(self.cfg.choices)]

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm.embed_tokens(ids)

    def hidden_states(self, x: torch.Tensor, pb: PagedBatch, k_pools: torch.Tensor,
                      v_pools: torch.Tensor) -> torch.Tensor:
        """x [B, T, H] -> final-norm hidden [B, T, H]; K/V written into the rows' pages."""
        return self.lm.forward_hidden(x, self.rotary, pb, k_pools, v_pools)

    def next_embedding(self, latent: torch.Tensor, semantic: torch.Tensor) -> torch.Tensor:
        """The next LM input of a frame: its acoustic latent [N, 64] and semantic features [N, 128]
        through their connectors, summed."""
        return self.model.multi_modal_projector(latent) + self.model.semantic_connector(semantic)
