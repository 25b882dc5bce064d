"""The Higgs Audio backbone in plain PyTorch over the engine's paged KV pool, with transformers' parameter
names for v2 (`model.layers.N.{self_attn,mlp,audio_mlp,...}`, `model.embed_audio_tokens...`, `audio_lm_head`).

v2 is Llama-3 with DualFFN: a position holding an audio frame (the generated frames, a voice-clone prompt's
frames) is normalised by `audio_input_layernorm` / `audio_post_attention_layernorm` and goes through
`audio_mlp`; text positions use the usual norms and `mlp`; attention is shared. v3 is Qwen3 (q/k RMSNorm per
head), no DualFFN. RoPE is half-split rotate_half with fp32 tables; v2 uses the llama3 frequency scaling.
Attention, the paged layout and the text path of a layer are the layer library's (models/layers).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..layers import DecoderLayer, PagedBatch, RMSNorm, Rotary, SwiGLU, llama_block
from .config import HiggsConfig


class DualFFNLayer(DecoderLayer):
    """The library's decoder block plus v2's audio path (`audio_input_layernorm`, `audio_mlp`,
    `audio_post_attention_layernorm`), which audio positions take instead of the text norms and MLP."""

    def __init__(self, cfg: HiggsConfig) -> None:
        super().__init__(llama_block(cfg, qk_norm=cfg.qk_norm))  # v3: Qwen3's q/k norm
        h, eps = cfg.hidden_size, cfg.rms_norm_eps
        self.dual = cfg.dual_ffn
        if cfg.dual_ffn:
            self.audio_mlp = SwiGLU(h, cfg.intermediate_size)
            self.audio_input_layernorm = RMSNorm(h, eps)
            self.audio_post_attention_layernorm = RMSNorm(h, eps)

    @staticmethod
    def _split(x: torch.Tensor, audio: torch.Tensor | None, text_fn, audio_fn) -> torch.Tensor:
        """Per position: audio_fn where `audio` [B, T] is set, text_fn elsewhere; each branch runs only on the
        positions it owns (as the reference's masked computation does)."""
        if audio is None:
            return text_fn(x)
        if bool(audio.all()):
            return audio_fn(x)
        if not bool(audio.any()):
            return text_fn(x)
        out = torch.empty_like(x)
        out[audio] = audio_fn(x[audio]).to(x.dtype)
        out[~audio] = text_fn(x[~audio]).to(x.dtype)
        return out

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, k_pool: torch.Tensor,
                v_pool: torch.Tensor, pb: PagedBatch, mask: torch.Tensor,
                audio: torch.Tensor | None = None) -> torch.Tensor:
        if not self.dual or audio is None:
            return super().forward(x, cos, sin, k_pool, v_pool, pb, mask)
        h = self._split(x, audio, self.input_layernorm, self.audio_input_layernorm)
        x = x + self.self_attn.forward_paged(h, cos, sin, k_pool, v_pool, pb, mask)

        def text_ffn(t):
            return self.mlp(self.post_attention_layernorm(t))

        def audio_ffn(t):
            return self.audio_mlp(self.audio_post_attention_layernorm(t))

        return x + self._split(x, audio, text_ffn, audio_ffn)


class AudioEmbedding(nn.Module):
    """One table for all codebooks (codebook k's ids offset by k * codebook_size); a frame embeds as the
    sum."""

    def __init__(self, cfg: HiggsConfig) -> None:
        super().__init__()
        self.embed_audio_tokens = nn.Embedding(cfg.num_codebooks * cfg.codebook_size, cfg.hidden_size)
        self.codebook_size = cfg.codebook_size

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        """frames [..., C] -> [..., H]."""
        off = torch.arange(frames.shape[-1], device=frames.device) * self.codebook_size
        return self.embed_audio_tokens(frames + off).sum(dim=-2)


class Backbone(nn.Module):
    """`model.*` of the transformers v2 checkpoint."""

    def __init__(self, cfg: HiggsConfig) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DualFFNLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.embed_audio_tokens = AudioEmbedding(cfg)


class HiggsWeights(nn.Module):
    """The v2 checkpoint root: `model.*` + `audio_lm_head` (num_codebooks * codebook_size outputs)."""

    def __init__(self, cfg: HiggsConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.model = Backbone(cfg)
        # v3 ties the audio head to the fused audio embedding (logits = h @ E^T): no tensor of its own.
        self.tied_head = cfg.variant == "v3" and cfg.tie_word_embeddings
        if not self.tied_head:
            self.audio_lm_head = nn.Linear(cfg.hidden_size, cfg.num_codebooks * cfg.codebook_size, bias=False)
        self.rotary = Rotary(cfg.head_dim, cfg.rope)

    def embed_text(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.embed_tokens(ids)

    def embed_audio(self, frames: torch.Tensor) -> torch.Tensor:
        return self.model.embed_audio_tokens(frames)

    def hidden_states(self, x, pb: PagedBatch, k_pools, v_pools, audio: torch.Tensor | None) -> torch.Tensor:
        """x [B, T, H] -> final-norm hidden [B, T, H]; audio [B, T] bool marks audio positions (DualFFN)."""
        cos, sin = self.rotary(pb.q_pos, x.dtype)
        mask = pb.mask()
        for i, layer in enumerate(self.model.layers):
            x = layer(x, cos, sin, k_pools[i], v_pools[i], pb, mask, audio)
        return self.model.norm(x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., H] -> [..., C, codebook_size]."""
        if self.tied_head:
            flat = F.linear(hidden, self.model.embed_audio_tokens.embed_audio_tokens.weight)
        else:
            flat = self.audio_lm_head(hidden)
        return flat.view(*hidden.shape[:-1], self.cfg.num_codebooks, self.cfg.codebook_size)
