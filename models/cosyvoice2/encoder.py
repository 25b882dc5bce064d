"""CosyVoice 2's flow encoder (upstream UpsampleConformerEncoder with rel_pos_espnet / rel_selfattn,
no macaron FFN, no conv module), names as in flow.pt under `encoder.`.

tokens -> Linear+LayerNorm, x sqrt(d) -> 3-token look-ahead layer -> conformer layers (block-causal in
blocks of `static_chunk_size` tokens when streaming) -> x2 nearest upsample + causal conv (kernel 5) ->
Linear+LayerNorm, x sqrt(d) -> more conformer layers (blocks twice as long) -> LayerNorm.

`EncoderCache` makes a streamed chunk cost its new tokens: each layer's keys/values of the positions done
so far, and the last two tokens of the first stack (the upsample conv's left context). Exact, because in
streaming mode a block never attends to a later block and the chunk boundaries fall on block boundaries
(upstream pads the first hop so that they do). The relative position term of a query at position i and a
key at j is computed from the sinusoid of i - j directly, which is what upstream's rel_shift arranges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .config import EncoderConfig

LOOKAHEAD = 3  # upstream hard-codes PreLookaheadLayer(pre_lookahead_len=3)
UP_KERNEL, UP_STRIDE = 5, 2  # Upsample1D: stride * 2 + 1, left padding stride * 2


class LinearEmbed(nn.Module):
    """LinearNoSubsampling: `out.0` Linear, `out.1` LayerNorm; the positional module scales by sqrt(d)."""

    def __init__(self, cin: int, d: int) -> None:
        super().__init__()
        self.out = nn.Sequential(nn.Linear(cin, d), nn.LayerNorm(d, eps=1e-5))
        self.scale = math.sqrt(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(x) * self.scale


class PreLookahead(nn.Module):
    def __init__(self, ch: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(ch, ch, kernel_size=LOOKAHEAD + 1)
        self.conv2 = nn.Conv1d(ch, ch, kernel_size=3)

    def forward(self, x: torch.Tensor, context: torch.Tensor | None, left: int) -> torch.Tensor:
        """x [W, C] = `left` tokens already done (their conv1 outputs feed conv2) + the new ones; context
        [3, C] = the tokens after them (None: zeros, the utterance end) -> output of the new tokens."""
        y = x.T[None]
        y = torch.cat([y, context.T[None]], 2) if context is not None else F.pad(y, (0, LOOKAHEAD))
        y = F.leaky_relu(self.conv1(y))
        y = self.conv2(F.pad(y, (2 - left, 0)))
        return y[0].T + x[left:]


class RelAttention(nn.Module):
    def __init__(self, heads: int, d: int) -> None:
        super().__init__()
        self.h, self.dk = heads, d // heads
        self.linear_q = nn.Linear(d, d)
        self.linear_k = nn.Linear(d, d)
        self.linear_v = nn.Linear(d, d)
        self.linear_out = nn.Linear(d, d)
        self.linear_pos = nn.Linear(d, d, bias=False)
        self.pos_bias_u = nn.Parameter(torch.zeros(heads, d // heads))
        self.pos_bias_v = nn.Parameter(torch.zeros(heads, d // heads))

    def forward(self, x: torch.Tensor, kv: list[torch.Tensor], pos0: int, block: int) -> torch.Tensor:
        """x [n, d] at positions pos0..; kv = [keys, values] [h, pos0, dk] of the positions before (extended
        in place); block > 0: block-causal attention, 0: full."""
        n = x.shape[0]
        q = self.linear_q(x).view(n, self.h, self.dk).transpose(0, 1)
        k = self.linear_k(x).view(n, self.h, self.dk).transpose(0, 1)
        v = self.linear_v(x).view(n, self.h, self.dk).transpose(0, 1)
        k = torch.cat([kv[0], k], 1)
        v = torch.cat([kv[1], v], 1)
        kv[0], kv[1] = k, v
        T = k.shape[1]
        dmin = pos0 - T + 1
        p = self.linear_pos(rel_sinusoids(torch.arange(dmin, pos0 + n), x.shape[1], x.dtype, x.device))
        p = p.view(-1, self.h, self.dk).transpose(0, 1)  # [h, D, dk]
        ac = torch.matmul(q + self.pos_bias_u[:, None], k.transpose(1, 2))
        bd_all = torch.matmul(q + self.pos_bias_v[:, None], p.transpose(1, 2))  # [h, n, D]
        qpos = torch.arange(pos0, pos0 + n, device=x.device)
        kpos = torch.arange(T, device=x.device)
        rel = (qpos[:, None] - kpos[None]) - dmin
        bd = torch.gather(bd_all, 2, rel[None].expand(self.h, n, T))
        scores = (ac + bd) / math.sqrt(self.dk)
        if block > 0:
            allowed = kpos[None] < ((qpos[:, None] // block) + 1) * block
            scores = scores.masked_fill(~allowed[None], -float("inf"))
            attn = torch.softmax(scores, dim=-1).masked_fill(~allowed[None], 0.0)
        else:
            attn = torch.softmax(scores, dim=-1)
        out = torch.matmul(attn, v).transpose(0, 1).reshape(n, -1)
        return self.linear_out(out)


def rel_sinusoids(d: torch.Tensor, dim: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """EspnetRelPositionalEncoding's row for relative position d (i - j): sin/cos(d * div) interleaved,
    computed in float32 as upstream's table is."""
    div = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * -(math.log(10000.0) / dim))
    ang = d.to(torch.float32)[:, None] * div[None]
    pe = torch.zeros(d.shape[0], dim)
    pe[:, 0::2] = torch.sin(ang)
    pe[:, 1::2] = torch.cos(ang)
    return pe.to(device, dtype)


class FeedForward(nn.Module):
    def __init__(self, d: int, units: int) -> None:
        super().__init__()
        self.w_1 = nn.Linear(d, units)
        self.w_2 = nn.Linear(units, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w_2(F.silu(self.w_1(x)))


class ConformerLayer(nn.Module):
    def __init__(self, c: EncoderConfig) -> None:
        super().__init__()
        self.self_attn = RelAttention(c.attention_heads, c.output_size)
        self.feed_forward = FeedForward(c.output_size, c.linear_units)
        self.norm_ff = nn.LayerNorm(c.output_size, eps=1e-12)
        self.norm_mha = nn.LayerNorm(c.output_size, eps=1e-12)

    def forward(self, x: torch.Tensor, kv: list[torch.Tensor], pos0: int, block: int) -> torch.Tensor:
        x = x + self.self_attn(self.norm_mha(x), kv, pos0, block)
        return x + self.feed_forward(self.norm_ff(x))


class Upsample(nn.Module):
    def __init__(self, ch: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(ch, ch, UP_KERNEL)

    def forward(self, x: torch.Tensor, left: torch.Tensor) -> torch.Tensor:
        """x [n, C] new tokens, left [m <= 2, C] the tokens before them -> [2n, C] frames."""
        y = F.interpolate(torch.cat([left, x]).T[None], scale_factor=float(UP_STRIDE), mode="nearest")
        y = F.pad(y, (UP_KERNEL - 1 - UP_STRIDE * left.shape[0], 0))
        return self.conv(y)[0].T


@dataclass
class EncoderCache:
    kv: list[list[torch.Tensor]] = field(default_factory=list)  # per layer (both stacks): [keys, values]
    tail: torch.Tensor | None = None  # last 2 tokens out of the first stack
    tokens: int = 0  # tokens done (prompt included)


class UpsampleConformerEncoder(nn.Module):
    def __init__(self, c: EncoderConfig, input_size: int) -> None:
        super().__init__()
        self.c = c
        d = c.output_size
        self.embed = LinearEmbed(input_size, d)
        self.pre_lookahead_layer = PreLookahead(d)
        self.encoders = nn.ModuleList(ConformerLayer(c) for _ in range(c.num_blocks))
        self.up_layer = Upsample(d)
        self.up_embed = LinearEmbed(input_size, d)
        self.up_encoders = nn.ModuleList(ConformerLayer(c) for _ in range(c.up_blocks))
        self.after_norm = nn.LayerNorm(d, eps=1e-5)

    def empty_cache(self, device: torch.device, dtype: torch.dtype) -> EncoderCache:
        h, dk = self.c.attention_heads, self.c.output_size // self.c.attention_heads
        n = len(self.encoders) + len(self.up_encoders)
        empty = torch.zeros(h, 0, dk, device=device, dtype=dtype)
        return EncoderCache([[empty, empty] for _ in range(n)], torch.zeros(0, self.c.output_size,
                                                                              device=device, dtype=dtype))

    def forward(self, emb: torch.Tensor, left: int, context: torch.Tensor | None, cache: EncoderCache,
                streaming: bool) -> torch.Tensor:
        """emb [left + n, C] token embeddings (`left` <= 2 tokens already done, then the new ones; a fresh
        cache with left 0 is the whole utterance), context [3, C] or None -> frames [2n, C]."""
        assert cache.tail is not None
        pos0 = cache.tokens
        block = self.c.static_chunk_size if streaming else 0
        x = self.pre_lookahead_layer(self.embed(emb), None if context is None else self.embed(context), left)
        n_first = len(self.encoders)
        for i, layer in enumerate(self.encoders):
            x = layer(x, cache.kv[i], pos0, block)
        up = self.up_layer(x, cache.tail)
        cache.tail = torch.cat([cache.tail, x])[-2:]
        cache.tokens = pos0 + x.shape[0]
        y = self.up_embed(up)
        for i, layer in enumerate(self.up_encoders):
            y = layer(y, cache.kv[n_first + i], pos0 * UP_STRIDE, block * UP_STRIDE)
        return self.after_norm(y)
