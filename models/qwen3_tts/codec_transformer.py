"""The codec decoder's `pre_transformer`: a sliding-window (72) causal transformer at 12.5 Hz.

Layers: RMSNorm -> MHA (RoPE theta 1e4, no qk-norm) -> LayerScale residual; RMSNorm -> SwiGLU ->
LayerScale residual. Query i sees keys j with i - window < j <= i.

Streaming keeps, per layer, the RoPE-rotated K and the V of the last `window - 1` frames (right-aligned
in a fixed [window-1] buffer) plus the absolute position of the next frame. RoPE is applied at the
absolute position, so cos/sin are bit-identical to the full forward.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..codecs.rope import apply_rope, rope_cos_sin
from ..codecs.streaming_conv import State, take_window
from ..layers import RMSNorm


@dataclass(frozen=True)
class TransformerDims:
    latent_dim: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    window: int
    rope_theta: float
    rms_eps: float
    attention_bias: bool




class LayerScale(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.full((dim,), 0.01))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * x


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Attention(nn.Module):
    def __init__(self, d: TransformerDims) -> None:
        super().__init__()
        self.d = d
        self.q_proj = nn.Linear(d.hidden_size, d.num_heads * d.head_dim, bias=d.attention_bias)
        self.k_proj = nn.Linear(d.hidden_size, d.num_kv_heads * d.head_dim, bias=d.attention_bias)
        self.v_proj = nn.Linear(d.hidden_size, d.num_kv_heads * d.head_dim, bias=d.attention_bias)
        self.o_proj = nn.Linear(d.num_heads * d.head_dim, d.hidden_size, bias=d.attention_bias)

    def qkv(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, n, _ = x.shape
        q = self.q_proj(x).view(b, n, -1, self.d.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, n, -1, self.d.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, n, -1, self.d.head_dim).transpose(1, 2)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        groups = self.d.num_heads // self.d.num_kv_heads
        if groups > 1:
            k = k.repeat_interleave(groups, dim=1)
            v = v.repeat_interleave(groups, dim=1)
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        b, _, n, _ = o.shape
        return self.o_proj(o.transpose(1, 2).reshape(b, n, -1))


class TransformerLayer(nn.Module):
    def __init__(self, d: TransformerDims) -> None:
        super().__init__()
        self.self_attn = Attention(d)
        self.mlp = SwiGLU(d.hidden_size, d.intermediate_size)
        self.input_layernorm = RMSNorm(d.hidden_size, d.rms_eps)
        self.post_attention_layernorm = RMSNorm(d.hidden_size, d.rms_eps)
        self.self_attn_layer_scale = LayerScale(d.hidden_size)
        self.mlp_layer_scale = LayerScale(d.hidden_size)

    def ffn(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp_layer_scale(self.mlp(self.post_attention_layernorm(x)))


class PreTransformer(nn.Module):
    def __init__(self, d: TransformerDims) -> None:
        super().__init__()
        self.d = d
        self.input_proj = nn.Linear(d.latent_dim, d.hidden_size)
        self.layers = nn.ModuleList([TransformerLayer(d) for _ in range(d.num_layers)])
        self.norm = RMSNorm(d.hidden_size, d.rms_eps)
        self.output_proj = nn.Linear(d.hidden_size, d.latent_dim)

    @property
    def cache_len(self) -> int:
        return self.d.window - 1

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        kv = (self.d.num_kv_heads, self.cache_len, self.d.head_dim)
        shapes: dict[str, tuple[int, ...]] = {"pre_transformer.pos": ()}
        for i in range(self.d.num_layers):
            shapes[f"pre_transformer.{i}.k"] = kv
            shapes[f"pre_transformer.{i}.v"] = kv
        return shapes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Full sequence x [B, T, latent] from position 0."""
        b, t, _ = x.shape
        h = self.input_proj(x)
        pos = torch.arange(t, device=x.device)
        cos, sin = rope_cos_sin(pos.expand(b, t), self.d.head_dim, self.d.rope_theta, h.dtype)
        diff = pos[:, None] - pos[None, :]  # query - key
        mask = ((diff >= 0) & (diff < self.d.window))[None, None]
        for layer in self.layers:
            q, k, v = layer.self_attn.qkv(layer.input_layernorm(h), cos, sin)
            h = h + layer.self_attn_layer_scale(layer.self_attn.attend(q, k, v, mask))
            h = layer.ffn(h)
        return self.output_proj(self.norm(h))

    def stream(self, x: torch.Tensor, lengths: torch.Tensor, st: State, new: State) -> torch.Tensor:
        """Chunk x [B, L, latent] (row b valid for lengths[b] frames) continuing each row's cache.

        Keys are [cache (C = window-1 slots, right-aligned) | chunk (L)]; key m has absolute position
        pos - C + m, so query j (position pos + j) may see m in [j, j + C] -- a band that does not
        depend on pos -- minus the cache slots that were never filled (m < C - min(pos, C))."""
        b, n, _ = x.shape
        c = self.cache_len
        pos = st["pre_transformer.pos"]
        h = self.input_proj(x)
        positions = pos[:, None] + torch.arange(n, device=x.device)
        cos, sin = rope_cos_sin(positions, self.d.head_dim, self.d.rope_theta, h.dtype)
        m = torch.arange(c + n, device=x.device)
        j = torch.arange(n, device=x.device)
        band = (m[None, :] >= j[:, None]) & (m[None, :] <= j[:, None] + c)  # [L, C+L]
        filled = m[None, :] >= (c - pos.clamp(max=c))[:, None]  # [B, C+L]
        mask = (band[None] & filled[:, None])[:, None]  # [B, 1, L, C+L]
        keep_from = lengths  # after the chunk, the last C keys start at index lengths[b]
        for i, layer in enumerate(self.layers):
            q, k, v = layer.self_attn.qkv(layer.input_layernorm(h), cos, sin)
            k = torch.cat([st[f"pre_transformer.{i}.k"], k], dim=2)
            v = torch.cat([st[f"pre_transformer.{i}.v"], v], dim=2)
            new[f"pre_transformer.{i}.k"] = take_window(k.transpose(2, 3), keep_from, c).transpose(2, 3)
            new[f"pre_transformer.{i}.v"] = take_window(v.transpose(2, 3), keep_from, c).transpose(2, 3)
            h = h + layer.self_attn_layer_scale(layer.self_attn.attend(q, k, v, mask))
            h = layer.ffn(h)
        new["pre_transformer.pos"] = pos + lengths
        return self.output_proj(self.norm(h))
