"""Multi-head self-attention with the transformers parameter names (`q_proj`, `k_proj`, `v_proj`, `o_proj`,
optional per-head `q_norm` / `k_norm`), so Llama, Qwen2 and Qwen3 state dicts load as they are.

Two entry points share one module:
  * `forward_paged` - a backbone: K/V live in the paged pool (`paged_attention`); every row of the batch
    has its own pages, length and positions.
  * `forward_dense` - a depth decoder: its per-frame `DenseCache` [B, <=frame positions, kv_heads,
    head_dim] where all rows sit at the same position, so no mask beyond plain causality is needed.
"""

from __future__ import annotations

import torch
from torch import nn

from .dense_cache import DenseCache
from .norms import RMSNorm
from .paged import PageSlots, attend, paged_attention
from .rope import apply_rope


class Attention(nn.Module):
    """`qk_norm`: RMSNorm over each head's q and k before RoPE (Qwen3); `bias` on the q/k/v projections
    and `out_bias` on o_proj (None: as `bias`; Qwen2 biases q/k/v only); `scale` of the softmax (None:
    1/sqrt(head_dim); Dia is trained unscaled)."""

    def __init__(self, hidden: int, heads: int, kv_heads: int, head_dim: int, *, eps: float = 1e-6,
                 qk_norm: bool = True, bias: bool = False, out_bias: bool | None = None,
                 scale: float | None = None) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.q_proj = nn.Linear(hidden, heads * head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden, kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=bias if out_bias is None else out_bias)
        self.qk_norm, self.scale = qk_norm, scale
        if qk_norm:
            self.q_norm = RMSNorm(head_dim, eps)
            self.k_norm = RMSNorm(head_dim, eps)

    def project(self, x: torch.Tensor, cos: torch.Tensor,
                sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """x [B, T, hidden] -> q, k, v [B, T, heads, hd], q and k rotated."""
        shape = (*x.shape[:-1], -1, self.head_dim)
        q, k = self.q_proj(x).view(shape), self.k_proj(x).view(shape)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), self.v_proj(x).view(shape)

    def forward_paged(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, k_pool: torch.Tensor,
                      v_pool: torch.Tensor, pb: PageSlots, mask: torch.Tensor) -> torch.Tensor:
        q, k, v = self.project(x, cos, sin)
        return self.o_proj(paged_attention(q, k, v, k_pool, v_pool, pb, mask, scale=self.scale))

    def forward_dense(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, cache: DenseCache,
                      layer: int) -> torch.Tensor:
        """x [B, T, hidden] after the cache's positions -> output; layer `layer` of `cache` grows by T."""
        q, k, v = self.project(x, cos, sin)
        k, v = cache.extend(layer, k, v)
        return self.o_proj(attend(q, k, v, None, causal=q.shape[1] > 1, scale=self.scale))
