"""CosyVoice 2's CFM estimator (upstream CausalConditionalDecoder, a 1-D UNet; matcha's ResnetBlock1D and
diffusers-style BasicTransformerBlock), names as in flow.pt under `decoder.estimator.`. CosyVoice2-0.5B
has one level (`channels: [256]`): resnet + transformer blocks, a causal conv, the mid blocks, then the
up level on [x, skip], a final causal block and a 1x1 projection.

Every convolution is causal (kernel 3) and the attention is block-causal (blocks of `static_chunk_size`
mel frames) when streaming, so `EstimatorCache` (per convolution: its last 2 input frames; per attention:
keys/values) lets a chunk of whole blocks run on its new frames only, exactly.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..base import CheckpointError
from .config import DecoderConfig

EstimatorCache = dict[str, torch.Tensor]  # by module path: conv tails [B, C, 2], keys/values [B, h, T, dk]


def _tail_conv(conv: nn.Conv1d, x: torch.Tensor, cache: EstimatorCache, key: str) -> torch.Tensor:
    """Causal conv of x [B, C, n] continuing the frames whose last inputs the cache holds."""
    k = conv.kernel_size[0] - 1
    prev = cache.get(key)
    xx = F.pad(x, (k, 0)) if prev is None else torch.cat([prev, x], 2)
    cache[key] = xx[:, :, -k:]
    return conv(xx)


class CausalBlock(nn.Module):
    """CausalBlock1D: `block.0` causal conv, `block.2` LayerNorm over channels, Mish."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Conv1d(cin, cout, 3), nn.Identity(), nn.LayerNorm(cout))

    def forward(self, x: torch.Tensor, cache: EstimatorCache, key: str) -> torch.Tensor:
        y = _tail_conv(self.block[0], x, cache, key)
        return F.mish(self.block[2](y.transpose(1, 2)).transpose(1, 2))


class ResnetBlock(nn.Module):
    def __init__(self, cin: int, cout: int, tdim: int) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Mish(), nn.Linear(tdim, cout))
        self.block1 = CausalBlock(cin, cout)
        self.block2 = CausalBlock(cout, cout)
        self.res_conv = nn.Conv1d(cin, cout, 1)

    def forward(self, x: torch.Tensor, t: torch.Tensor, cache: EstimatorCache, key: str) -> torch.Tensor:
        h = self.block1(x, cache, key + ".1")
        h = h + self.mlp(t).unsqueeze(-1)
        h = self.block2(h, cache, key + ".2")
        return h + self.res_conv(x)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int, dim_head: int) -> None:
        super().__init__()
        self.heads, self.dim_head = heads, dim_head
        inner = heads * dim_head
        self.to_q = nn.Linear(dim, inner, bias=False)
        self.to_k = nn.Linear(dim, inner, bias=False)
        self.to_v = nn.Linear(dim, inner, bias=False)
        self.to_out = nn.ModuleList([nn.Linear(inner, dim)])

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, cache: EstimatorCache, key: str
    ) -> torch.Tensor:
        B, n, _ = x.shape
        shape = (B, n, self.heads, self.dim_head)
        q = self.to_q(x).view(shape).transpose(1, 2)
        k = self.to_k(x).view(shape).transpose(1, 2)
        v = self.to_v(x).view(shape).transpose(1, 2)
        if key + ".k" in cache:
            k = torch.cat([cache[key + ".k"], k], 2)
            v = torch.cat([cache[key + ".v"], v], 2)
        cache[key + ".k"], cache[key + ".v"] = k, v
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.to_out[0](out.transpose(1, 2).reshape(B, n, -1))


class FeedForward(nn.Module):
    """diffusers FeedForward with exact GELU: `net.0.proj`, `net.2`."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.net = nn.ModuleList([nn.Module(), nn.Identity(), nn.Linear(dim * 4, dim)])
        self.net[0].proj = nn.Linear(dim, dim * 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net[2](F.gelu(self.net[0].proj(x)))


class TransformerBlock(nn.Module):
    def __init__(self, dim: int, heads: int, dim_head: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn1 = Attention(dim, heads, dim_head)
        self.norm3 = nn.LayerNorm(dim)
        self.ff = FeedForward(dim)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, cache: EstimatorCache, key: str
    ) -> torch.Tensor:
        x = x + self.attn1(self.norm1(x), mask, cache, key)
        return x + self.ff(self.norm3(x))


class TimestepEmbedding(nn.Module):
    def __init__(self, cin: int, dim: int) -> None:
        super().__init__()
        self.linear_1 = nn.Linear(cin, dim)
        self.linear_2 = nn.Linear(dim, dim)

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return self.linear_2(F.silu(self.linear_1(t)))


def sinusoidal(t: torch.Tensor, dim: int, scale: float = 1000) -> torch.Tensor:
    """matcha's SinusoidalPosEmb."""
    half = dim // 2
    e = math.log(10000) / (half - 1)
    e = torch.exp(torch.arange(half, device=t.device).float() * -e)
    e = scale * t.unsqueeze(1) * e.unsqueeze(0)
    return torch.cat((e.sin(), e.cos()), dim=-1)


def _blocks(dim: int, c: DecoderConfig) -> nn.ModuleList:
    return nn.ModuleList(TransformerBlock(dim, c.num_heads, c.attention_head_dim) for _ in range(c.n_blocks))


class Estimator(nn.Module):
    def __init__(self, c: DecoderConfig) -> None:
        super().__init__()
        if len(c.channels) != 1:
            raise CheckpointError(
                f"the flow estimator has channels {list(c.channels)}; voxcli serves CosyVoice 2's one-level "
                "UNet (channels: [256])"
            )
        self.c = c
        ch = c.channels[0]
        tdim = ch * 4
        self.time_mlp = TimestepEmbedding(c.in_channels, tdim)
        self.down_blocks = nn.ModuleList([nn.ModuleList([
            ResnetBlock(c.in_channels, ch, tdim), _blocks(ch, c), nn.Conv1d(ch, ch, 3)])])
        self.mid_blocks = nn.ModuleList(
            nn.ModuleList([ResnetBlock(ch, ch, tdim), _blocks(ch, c)]) for _ in range(c.num_mid_blocks))
        self.up_blocks = nn.ModuleList([nn.ModuleList([
            ResnetBlock(2 * ch, ch, tdim), _blocks(ch, c), nn.Conv1d(ch, ch, 3)])])
        self.final_block = CausalBlock(ch, ch)
        self.final_proj = nn.Conv1d(ch, c.out_channels, 1)

    def forward(self, x: torch.Tensor, mu: torch.Tensor, t: torch.Tensor, spks: torch.Tensor,
                cond: torch.Tensor, cache: EstimatorCache, pos0: int, streaming: bool) -> torch.Tensor:
        """x, mu, cond [B, 80, n] of frames pos0..; spks [B, 80]; t [B] -> velocity [B, 80, n]."""
        tt = self.time_mlp(sinusoidal(t, self.c.in_channels).to(t.dtype))
        n = x.shape[2]
        h = torch.cat([x, mu, spks[:, :, None].expand(-1, -1, n), cond], 1)
        mask = None
        if streaming:
            qpos = torch.arange(pos0, pos0 + n, device=x.device)
            kpos = torch.arange(pos0 + n, device=x.device)
            blk = self.c.static_chunk_size
            mask = kpos[None] < ((qpos[:, None] // blk) + 1) * blk
        resnet, blocks, down = self.down_blocks[0]
        h = self._level(resnet, blocks, h, tt, mask, cache, "d")
        skip = h
        h = _tail_conv(down, h, cache, "d.down")
        for i, (resnet, blocks) in enumerate(self.mid_blocks):
            h = self._level(resnet, blocks, h, tt, mask, cache, f"m{i}")
        resnet, blocks, up = self.up_blocks[0]
        h = self._level(resnet, blocks, torch.cat([h, skip], 1), tt, mask, cache, "u")
        h = _tail_conv(up, h, cache, "u.up")
        h = self.final_block(h, cache, "f")
        return self.final_proj(h)

    @staticmethod
    def _level(resnet: ResnetBlock, blocks: nn.ModuleList, h: torch.Tensor, t: torch.Tensor,
               mask: torch.Tensor | None, cache: EstimatorCache, key: str) -> torch.Tensor:
        h = resnet(h, t, cache, key + ".r")
        y = h.transpose(1, 2)
        for j, blk in enumerate(blocks):
            y = blk(y, mask, cache, f"{key}.t{j}")
        return y.transpose(1, 2)
