"""VibeVoice's networks under the checkpoint's own names (`model.language_model.*`, `model.audio_tower.
decoder.*`, `model.semantic_tokenizer_encoder.*`, `model.diffusion_head.*`, the two connectors, the latent's
scale and bias, `lm_head` when it is not tied), and the LM's forward over the engine's paged KV pool.

The acoustic tokenizer's encoder (`model.audio_tower.encoder.*`) encodes voice samples; it is not read
(generation never runs it for a text-only prompt), so loading skips it.
"""

from __future__ import annotations

import torch
from torch import nn

from ..flowlm.lm import Qwen2Model
from ..qwen3_tts.layers import PagedBatch, Rotary
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
        self.language_model = Qwen2Model(cfg.text)
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
        self.rotary = Rotary(cfg.text.hidden_size // cfg.text.num_attention_heads, cfg.text.rope_theta)

    @property
    def lm(self) -> Qwen2Model:
        return self.model.language_model

    def choice_rows(self) -> torch.Tensor:
        """[4, H]: the LM head's rows of the four tokens generate() may pick (the others are masked to
        -inf, and the guidance's log-softmax constants are equal across tokens, so only these decide)."""
        w = self.lm_head.weight if hasattr(self, "lm_head") else self.lm.embed_tokens.weight
        return w[list(self.cfg.choices)]

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm.embed_tokens(ids)

    def forward_paged(self, x: torch.Tensor, pb: PagedBatch, k_pools: torch.Tensor,
                      v_pools: torch.Tensor) -> torch.Tensor:
        """x [B, T, H] -> final-norm hidden [B, T, H]; K/V written into the rows' pages."""
        cos, sin = self.rotary(pb.q_pos, x.dtype)
        mask = pb.mask()
        for i, layer in enumerate(self.lm.layers):
            x = layer.forward_paged(x, cos, sin, k_pools[i], v_pools[i], pb, mask)
        return self.lm.norm(x)

    def next_embedding(self, latent: torch.Tensor, semantic: torch.Tensor) -> torch.Tensor:
        """The next LM input of a frame: its acoustic latent [N, 64] and semantic features [N, 128]
        through their connectors, summed."""
        return self.model.multi_modal_projector(latent) + self.model.semantic_connector(semantic)
