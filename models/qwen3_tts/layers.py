"""Qwen3 decoder blocks in plain PyTorch, with the official parameter names (state dicts load as-is).

Two attention entry points share one module:
  * `forward_paged` - the talker: K/V live in a paged pool ([pages, page_size, kv_heads, head_dim] per
    layer); every row of the batch has its own page list, length and positions.
  * `forward_dense` - the code predictor: a tiny per-frame cache [B, kv_heads, <=17, head_dim] where
    all rows sit at the same position, so no mask beyond plain causality is needed.

RoPE: the talker's config says "multimodal RoPE", but its three position streams are always equal,
which makes it plain 1-D RoPE with half-split rotate_half (see the design notes, section 1a).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ..norms import RMSNorm
from .config import BlockConfig


class SwiGLU(nn.Module):
    def __init__(self, hidden: int, inner: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inner, bias=False)
        self.up_proj = nn.Linear(hidden, inner, bias=False)
        self.down_proj = nn.Linear(inner, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Rotary:
    """cos/sin tables for integer positions (computed like the reference: fp32 inv_freq, outer product)."""

    def __init__(self, head_dim: int, theta: float) -> None:
        # Built on the CPU explicitly: modules are often constructed under `torch.device("meta")`.
        steps = torch.arange(0, head_dim, 2, dtype=torch.int64, device="cpu").float()
        self.inv_freq = 1.0 / (theta ** (steps / head_dim))

    def __call__(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        inv = self.inv_freq.to(positions.device)
        freqs = positions.float()[..., None] * inv  # [..., head_dim/2]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [..., T, heads, hd]; cos/sin [..., T, hd]."""
    cos, sin = cos.unsqueeze(-2), sin.unsqueeze(-2)
    return x * cos + _rotate_half(x) * sin


@dataclass
class PagedBatch:
    """Where each token of a flattened batch goes in the paged pool and what it may attend to.

    Queries are laid out [B, Tq] (right-padded); `q_pos[b, i]` is the absolute position of query i of
    row b; `slots[b, i]` is its flat pool index (page * page_size + offset), -1 for padding.
    `block_table [B, P]` lists each row's pages (padded with page 0); `kv_len[b]` is the row's length
    after this step. Key j of row b is visible to query i iff j <= q_pos[b, i] and j < kv_len[b]."""

    q_pos: torch.Tensor  # [B, Tq] int64
    slots: torch.Tensor  # [B, Tq] int64
    block_table: torch.Tensor  # [B, P] int64
    kv_len: torch.Tensor  # [B] int64
    page_size: int

    @classmethod
    def for_rows(cls, rows: Sequence[Any], starts: list[int], counts: list[int], page_size: int,
                 device: torch.device) -> PagedBatch:
        """Positions `starts[b] .. starts[b] + counts[b]` of each row (anything with `pages` and
        `request_id`, e.g. the engine's Row), checked against the pages the row holds."""
        ps, T = page_size, max(counts)
        q_pos = torch.zeros(len(rows), T, dtype=torch.long)
        slots = torch.full((len(rows), T), -1, dtype=torch.long)
        table = torch.zeros(len(rows), max(len(r.pages) for r in rows), dtype=torch.long)
        for b, (r, s, n) in enumerate(zip(rows, starts, counts, strict=True)):
            if s + n > len(r.pages) * ps:
                raise RuntimeError(f"request {r.request_id} needs {s + n} KV positions but holds "
                                   f"{len(r.pages)} pages of {ps}")
            pos = torch.arange(s, s + n)
            pages = torch.tensor(r.pages, dtype=torch.long)
            q_pos[b, :n] = pos
            slots[b, :n] = pages[pos // ps] * ps + pos % ps
            table[b, : len(r.pages)] = pages
        kv_len = torch.tensor([s + n for s, n in zip(starts, counts, strict=True)])
        d = device
        return cls(q_pos.to(d), slots.to(d), table.to(d), kv_len.to(d), ps)

    def mask(self) -> torch.Tensor:
        """Boolean attention mask [B, 1, Tq, P*page_size] (True = attend)."""
        n_keys = self.block_table.shape[1] * self.page_size
        j = torch.arange(n_keys, device=self.q_pos.device)
        m = (j[None, None, :] <= self.q_pos[:, :, None]) & (j[None, None, :] < self.kv_len[:, None, None])
        # Padded queries would see no key at all (NaN in softmax); let them see key 0 and drop them later.
        m[..., 0] |= ~m.any(-1)
        return m[:, None]


class Attention(nn.Module):
    def __init__(self, cfg: BlockConfig) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = (
            cfg.num_attention_heads,
            cfg.num_key_value_heads,
            cfg.head_dim,
        )
        bias = cfg.attention_bias
        self.q_proj = nn.Linear(cfg.hidden_size, self.heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(cfg.hidden_size, self.kv_heads * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(cfg.hidden_size, self.kv_heads * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.head_dim, cfg.hidden_size, bias=bias)
        self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)

    def _qkv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        shape = (*x.shape[:-1], -1, self.head_dim)
        q = apply_rope(self.q_norm(self.q_proj(x).view(shape)), cos, sin)
        k = apply_rope(self.k_norm(self.k_proj(x).view(shape)), cos, sin)
        v = self.v_proj(x).view(shape)
        return q, k, v  # [B, T, heads, hd]

    def _attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor | None,
        causal: bool = False,
    ) -> torch.Tensor:
        """q [B, Tq, H, hd], k/v [B, Tk, KVH, hd] -> [B, Tq, H*hd]."""
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=causal, enable_gqa=self.heads != self.kv_heads
        )
        return out.transpose(1, 2).reshape(*out.shape[:1], out.shape[2], -1)

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
        return self.o_proj(self._attend(q, keys, vals, mask))

    def forward_dense(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: list[torch.Tensor] | None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        q, k, v = self._qkv(x, cos, sin)
        if cache is not None:
            k, v = torch.cat([cache[0], k], dim=1), torch.cat([cache[1], v], dim=1)
        causal = q.shape[1] > 1
        return self.o_proj(self._attend(q, k, v, None, causal=causal)), [k, v]


class DecoderLayer(nn.Module):
    def __init__(self, cfg: BlockConfig) -> None:
        super().__init__()
        self.self_attn = Attention(cfg)
        self.mlp = SwiGLU(cfg.hidden_size, cfg.intermediate_size)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def _mlp(self, h: torch.Tensor) -> torch.Tensor:
        return h + self.mlp(self.post_attention_layernorm(h))

    def forward_paged(self, x, cos, sin, k_pool, v_pool, pb: PagedBatch, mask) -> torch.Tensor:
        h = x + self.self_attn.forward_paged(self.input_layernorm(x), cos, sin, k_pool, v_pool, pb, mask)
        return self._mlp(h)

    def forward_dense(self, x, cos, sin, cache):
        a, cache = self.self_attn.forward_dense(self.input_layernorm(x), cos, sin, cache)
        return self._mlp(x + a), cache
