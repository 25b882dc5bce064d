"""Mimi's decoder transformer at 25 Hz with exact streaming (transformers `MimiTransformerModel`).

Layers as the encoder's (LayerNorm, RoPE attention, LayerScale, GELU MLP; `encoder.py` `_Layer`, same
parameter names); query i sees keys i - window < j <= i (transformers 5.x's sliding-window mask).

Streaming keeps, per layer, the RoPE-rotated K and the V of the last `window - 1` positions (right-aligned
in a fixed buffer) plus the absolute position of the next one, so a request's chunks decoded in order
equal one full forward (the band-mask arithmetic is Qwen3-TTS's codec transformer's,
models/qwen3_tts/codec_transformer.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..rope import apply_rope, rope_cos_sin
from ..streaming_conv import State, take_window
from .config import MimiConfig
from .encoder import _Layer


class StreamingTransformer(nn.Module):
    def __init__(self, cfg: MimiConfig, key: str) -> None:
        super().__init__()
        self.cfg = cfg
        self.key = key  # its name in the slot table (e.g. "decoder_transformer")
        self.layers = nn.ModuleList([_Layer(cfg) for _ in range(cfg.num_layers)])

    @property
    def cache_len(self) -> int:
        return self.cfg.sliding_window - 1

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        kv = (self.cfg.num_kv_heads, self.cache_len, self.cfg.head_dim)
        shapes: dict[str, tuple[int, ...]] = {f"{self.key}.pos": ()}
        for i in range(self.cfg.num_layers):
            shapes[f"{self.key}.{i}.k"] = kv
            shapes[f"{self.key}.{i}.v"] = kv
        return shapes

    def _layer(
        self,
        layer: _Layer,
        h: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        kv: tuple[torch.Tensor, torch.Tensor] | None,
        mask: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        c = self.cfg
        b, t, _ = h.shape
        a = layer.self_attn
        x = layer.input_layernorm(h)
        q = apply_rope(a.q_proj(x).view(b, t, -1, c.head_dim).transpose(1, 2), cos, sin)
        k = apply_rope(a.k_proj(x).view(b, t, -1, c.head_dim).transpose(1, 2), cos, sin)
        v = a.v_proj(x).view(b, t, -1, c.head_dim).transpose(1, 2)
        if kv is not None:
            k, v = torch.cat([kv[0], k], dim=2), torch.cat([kv[1], v], dim=2)
        groups = c.num_heads // c.num_kv_heads
        kk, vv = (k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)) if groups > 1 else (k, v)
        o = F.scaled_dot_product_attention(q, kk, vv, attn_mask=mask)
        h = h + layer.self_attn_layer_scale.scale * a.o_proj(o.transpose(1, 2).reshape(b, t, -1))
        m = layer.mlp.fc2(F.gelu(layer.mlp.fc1(layer.post_attention_layernorm(h))))
        return h + layer.mlp_layer_scale.scale * m, k, v

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Full sequence x [B, T, hidden] from position 0."""
        b, t, _ = x.shape
        pos = torch.arange(t, device=x.device)
        cos, sin = rope_cos_sin(pos.expand(b, t), self.cfg.head_dim, self.cfg.rope_theta, x.dtype)
        diff = pos[:, None] - pos[None, :]
        mask = ((diff >= 0) & (diff < self.cfg.sliding_window))[None, None]
        for layer in self.layers:
            x, _, _ = self._layer(layer, x, cos, sin, None, mask)
        return x

    def stream(self, x: torch.Tensor, lengths: torch.Tensor, st: State, new: State) -> torch.Tensor:
        """Chunk x [B, L, hidden] (row b valid for lengths[b] positions) continuing each row's cache.

        Keys are [cache (C = window-1, right-aligned) | chunk (L)]; key m has absolute position
        pos - C + m, so query j (position pos + j) sees m in [j, j + C], minus the cache slots never
        filled (m < C - min(pos, C))."""
        b, n, _ = x.shape
        c = self.cache_len
        pos = st[f"{self.key}.pos"]
        positions = pos[:, None] + torch.arange(n, device=x.device)
        cos, sin = rope_cos_sin(positions, self.cfg.head_dim, self.cfg.rope_theta, x.dtype)
        m = torch.arange(c + n, device=x.device)
        j = torch.arange(n, device=x.device)
        band = (m[None, :] >= j[:, None]) & (m[None, :] <= j[:, None] + c)
        filled = m[None, :] >= (c - pos.clamp(max=c))[:, None]
        mask = (band[None] & filled[:, None])[:, None]
        for i, layer in enumerate(self.layers):
            kv = (st[f"{self.key}.{i}.k"], st[f"{self.key}.{i}.v"])
            x, k, v = self._layer(layer, x, cos, sin, kv, mask)
            new[f"{self.key}.{i}.k"] = take_window(k.transpose(2, 3), lengths, c).transpose(2, 3)
            new[f"{self.key}.{i}.v"] = take_window(v.transpose(2, 3), lengths, c).transpose(2, 3)
        new[f"{self.key}.pos"] = pos + lengths
        return x
