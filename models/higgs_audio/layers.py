"""The Higgs Audio backbone in plain PyTorch over the engine's paged KV pool, with transformers' parameter
names for v2 (`model.layers.N.{self_attn,mlp,audio_mlp,...}`, `model.embed_audio_tokens...`, `audio_lm_head`).

v2 is Llama-3 with DualFFN: a position holding an audio frame (the generated frames, a voice-clone prompt's
frames) is normalised by `audio_input_layernorm` / `audio_post_attention_layernorm` and goes through
`audio_mlp`; text positions use the usual norms and `mlp`; attention is shared. v3 is Qwen3 (q/k RMSNorm per
head), no DualFFN. RoPE is half-split rotate_half with fp32 tables; v2 uses the llama3 frequency scaling.
The paged layout and mask are the Qwen family's (`PagedBatch`).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..norms import RMSNorm
from ..qwen3_tts.layers import PagedBatch, SwiGLU, apply_rope
from .config import HiggsConfig, Rope


def inv_frequencies(head_dim: int, rope: Rope) -> torch.Tensor:
    """transformers' default / llama3 inverse frequencies (fp32, on the CPU)."""
    steps = torch.arange(0, head_dim, 2, dtype=torch.int64, device="cpu").float()
    inv = 1.0 / (rope.theta ** (steps / head_dim))
    if rope.rope_type != "llama3":
        return inv
    old = rope.original_max_position_embeddings
    low_wl, high_wl = old / rope.low_freq_factor, old / rope.high_freq_factor
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wl, inv / rope.factor, inv)
    smooth = (old / wavelen - rope.low_freq_factor) / (rope.high_freq_factor - rope.low_freq_factor)
    smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled
    medium = ~(wavelen < high_wl) * ~(wavelen > low_wl)
    return torch.where(medium, smoothed, scaled)


class Rotary:
    def __init__(self, head_dim: int, rope: Rope) -> None:
        self.inv_freq = inv_frequencies(head_dim, rope)

    def __call__(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions.float()[..., None] * self.inv_freq.to(positions.device)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)


class Attention(nn.Module):
    def __init__(self, cfg: HiggsConfig) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = (
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
            cfg.head_dim,
        )
        h, b = cfg.hidden_size, cfg.attention_bias
        self.q_proj = nn.Linear(h, self.heads * self.head_dim, bias=b)
        self.k_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=b)
        self.v_proj = nn.Linear(h, self.kv_heads * self.head_dim, bias=b)
        self.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=b)
        if cfg.qk_norm:
            self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
            self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        self.qk_norm = cfg.qk_norm

    def forward(self, x, cos, sin, k_pool, v_pool, pb: PagedBatch, mask) -> torch.Tensor:
        shape = (*x.shape[:-1], -1, self.head_dim)
        q, k, v = self.q_proj(x).view(shape), self.k_proj(x).view(shape), self.v_proj(x).view(shape)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        flat_k = k_pool.view(-1, self.kv_heads, self.head_dim)
        flat_v = v_pool.view(-1, self.kv_heads, self.head_dim)
        valid = pb.slots >= 0
        idx = pb.slots[valid]
        flat_k[idx] = k[valid].to(flat_k.dtype)
        flat_v[idx] = v[valid].to(flat_v.dtype)
        B, P = pb.block_table.shape
        keys = k_pool[pb.block_table].view(B, P * pb.page_size, self.kv_heads, self.head_dim)
        vals = v_pool[pb.block_table].view(B, P * pb.page_size, self.kv_heads, self.head_dim)
        qt, kt, vt = q.transpose(1, 2), keys.to(q.dtype).transpose(1, 2), vals.to(q.dtype).transpose(1, 2)
        out = F.scaled_dot_product_attention(
            qt, kt, vt, attn_mask=mask, enable_gqa=self.heads != self.kv_heads
        )
        return self.o_proj(out.transpose(1, 2).reshape(*x.shape[:-1], -1))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: HiggsConfig) -> None:
        super().__init__()
        h, eps = cfg.hidden_size, cfg.rms_norm_eps
        self.self_attn = Attention(cfg)
        self.mlp = SwiGLU(h, cfg.intermediate_size)
        self.input_layernorm = RMSNorm(h, eps)
        self.post_attention_layernorm = RMSNorm(h, eps)
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

    def forward(self, x, cos, sin, k_pool, v_pool, pb: PagedBatch, mask, audio: torch.Tensor | None):
        if not self.dual:
            audio = None
        au_in = self.audio_input_layernorm if self.dual else None
        h = self._split(x, audio, self.input_layernorm, au_in)
        x = x + self.self_attn(h, cos, sin, k_pool, v_pool, pb, mask)

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
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
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

    def forward_paged(self, x, pb: PagedBatch, k_pools, v_pools, audio: torch.Tensor | None) -> torch.Tensor:
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
