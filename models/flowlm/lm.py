"""The speech-token LM of upstream's CosyVoice models: a Qwen2 decoder (upstream wraps transformers'
Qwen2ForCausalLM) over the paged KV pool, plus the speech-token embedding and decoder head. The ends
are CosyVoice3LM's (sos and task_id are rows of the speech table); a family whose LM has other ends
(CosyVoice 2's Qwen2LM) replaces them in a subclass.

Module tree and names follow `llm.pt` (`llm.model.model.layers.N...`, `llm_decoder.weight`,
`speech_embedding.weight`), so its state dict loads without renaming. Qwen2 differs from the Qwen3 blocks
in models/qwen3_tts/layers.py only in the attention (biased q/k/v, no q/k norms); the rest is reused.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..norms import RMSNorm
from ..qwen3_tts.layers import PagedBatch, Rotary, SwiGLU, apply_rope
from .config import LMConfig, Qwen2Config


class Qwen2Attention(nn.Module):
    def __init__(self, c: Qwen2Config) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.q_proj = nn.Linear(c.hidden_size, self.heads * self.head_dim, bias=True)
        self.k_proj = nn.Linear(c.hidden_size, self.kv_heads * self.head_dim, bias=True)
        self.v_proj = nn.Linear(c.hidden_size, self.kv_heads * self.head_dim, bias=True)
        self.o_proj = nn.Linear(self.heads * self.head_dim, c.hidden_size, bias=False)

    def forward_paged(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        k_pool: torch.Tensor,
        v_pool: torch.Tensor,
        pb: PagedBatch,
        mask: torch.Tensor,
    ) -> torch.Tensor:
        shape = (*x.shape[:-1], -1, self.head_dim)
        q = apply_rope(self.q_proj(x).view(shape), cos, sin)
        k = apply_rope(self.k_proj(x).view(shape), cos, sin)
        v = self.v_proj(x).view(shape)
        flat_k = k_pool.view(-1, self.kv_heads, self.head_dim)
        flat_v = v_pool.view(-1, self.kv_heads, self.head_dim)
        valid = pb.slots >= 0
        flat_k[pb.slots[valid]] = k[valid].to(flat_k.dtype)
        flat_v[pb.slots[valid]] = v[valid].to(flat_v.dtype)
        B, P = pb.block_table.shape
        keys = k_pool[pb.block_table].view(B, P * pb.page_size, self.kv_heads, self.head_dim)
        vals = v_pool[pb.block_table].view(B, P * pb.page_size, self.kv_heads, self.head_dim)
        out = F.scaled_dot_product_attention(
            q.transpose(1, 2),
            keys.transpose(1, 2).to(q.dtype),
            vals.transpose(1, 2).to(q.dtype),
            attn_mask=mask,
            enable_gqa=self.heads != self.kv_heads,
        )
        return self.o_proj(out.transpose(1, 2).reshape(B, x.shape[1], -1))


class Qwen2Layer(nn.Module):
    def __init__(self, c: Qwen2Config) -> None:
        super().__init__()
        self.self_attn = Qwen2Attention(c)
        self.mlp = SwiGLU(c.hidden_size, c.intermediate_size)
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)

    def forward_paged(self, x, cos, sin, k_pool, v_pool, pb: PagedBatch, mask) -> torch.Tensor:
        h = x + self.self_attn.forward_paged(self.input_layernorm(x), cos, sin, k_pool, v_pool, pb, mask)
        return h + self.mlp(self.post_attention_layernorm(h))


class Qwen2Model(nn.Module):
    def __init__(self, c: Qwen2Config) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(Qwen2Layer(c) for _ in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)


class Qwen2ForCausalLM(nn.Module):
    """Only `model` is used: upstream reads the last hidden state, never `lm_head` (kept for the keys)."""

    def __init__(self, c: Qwen2Config) -> None:
        super().__init__()
        self.model = Qwen2Model(c)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)


class Qwen2Encoder(nn.Module):
    def __init__(self, c: Qwen2Config) -> None:
        super().__init__()
        self.model = Qwen2ForCausalLM(c)


class SpeechLMWeights(nn.Module):
    """The state dict of `llm.pt`."""

    def __init__(self, cfg: LMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        q = cfg.qwen
        self.llm = Qwen2Encoder(q)
        self.llm_decoder = nn.Linear(q.hidden_size, cfg.vocab, bias=False)
        self.speech_embedding = nn.Embedding(cfg.vocab, q.hidden_size)
        self.rotary = Rotary(q.head_dim, q.rope_theta)

    @property
    def backbone(self) -> Qwen2Model:
        return self.llm.model.model

    def text(self, ids: torch.Tensor) -> torch.Tensor:
        return self.backbone.embed_tokens(ids)

    def speech(self, ids: torch.Tensor) -> torch.Tensor:
        return self.speech_embedding(ids)

    def sos_task(self) -> torch.Tensor:
        """[2, H]: the embeddings before and after the text (CosyVoice3LM: speech rows sos and task_id)."""
        return self.speech_embedding.weight[[self.cfg.sos, self.cfg.task_id]]

    def forward_paged(
        self, x: torch.Tensor, pb: PagedBatch, k_pools: torch.Tensor, v_pools: torch.Tensor
    ) -> torch.Tensor:
        """x [B, T, H] -> final-norm hidden [B, T, H]; K/V written into the rows' pages."""
        cos, sin = self.rotary(pb.q_pos, x.dtype)
        mask = pb.mask()
        for i, layer in enumerate(self.backbone.layers):
            x = layer.forward_paged(x, cos, sin, k_pools[i], v_pools[i], pb, mask)
        return self.backbone.norm(x)

    def logp(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.llm_decoder(hidden).float().log_softmax(dim=-1)
