"""The flow's estimator: CosyVoice 3's DiT (F5-TTS style) with upstream's parameter names
(`decoder.estimator.*` in flow.pt), written so that a chunk of NEW frames can run against the keys and
values of earlier frames kept from before (`DiTCache`).

Why that is exact when streaming: every part of the DiT is causal at block granularity. The input
projection and the time/speaker modulation are per frame, the convolutional position embedding is
left-padded (causal, 30 + 30 frames of left context), and the attention is block-causal in blocks of
`static_chunk_size` mel frames. A frame in a completed block therefore sees exactly what it saw when its
block was first computed, so its per-layer keys/values at each Euler step can be reused verbatim.

Quirks of the reference kept on purpose: rotary position embedding is applied to the first `dim_head`
channels of the flattened query/key (head 0 only), with interleaved pairs (x-transformers' convention).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .config import DiTConfig

CONV_KERNEL = 31  # CausalConvPositionEmbedding's kernel (two convolutions)
CONV_GROUPS = 16


class TimeMLP(nn.Module):
    def __init__(self, dim: int, freq_dim: int = 256) -> None:
        super().__init__()
        self.freq_dim = freq_dim
        self.time_mlp = nn.Sequential(nn.Linear(freq_dim, dim), nn.SiLU(), nn.Linear(dim, dim))

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        half = self.freq_dim // 2
        step = math.log(10000) / (half - 1)
        freqs = torch.exp(torch.arange(half, device=t.device).float() * -step)
        emb = 1000 * t.unsqueeze(1) * freqs.unsqueeze(0)
        emb = torch.cat((emb.sin(), emb.cos()), dim=-1).to(t.dtype)
        return self.time_mlp(emb)


class ConvPosEmbed(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.conv1 = nn.Sequential(nn.Conv1d(dim, dim, CONV_KERNEL, groups=CONV_GROUPS), nn.Mish())
        self.conv2 = nn.Sequential(nn.Conv1d(dim, dim, CONV_KERNEL, groups=CONV_GROUPS), nn.Mish())


class InputEmbed(nn.Module):
    def __init__(self, c: DiTConfig) -> None:
        super().__init__()
        self.proj = nn.Linear(c.mel_dim * 2 + c.mu_dim + c.spk_dim, c.dim)
        self.conv_pos_embed = ConvPosEmbed(c.dim)


class RotaryFreqs(nn.Module):
    def __init__(self, dim_head: int) -> None:
        super().__init__()
        steps = torch.arange(0, dim_head, 2, device="cpu").float()  # explicit: modules are built on "meta"
        self.register_buffer("inv_freq", 1.0 / (10000.0 ** (steps / dim_head)))

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        """positions [B, T] -> interleaved angles [B, T, dim_head]."""
        f = positions.to(self.inv_freq.dtype)[..., None] * self.inv_freq
        return torch.stack((f, f), dim=-1).flatten(-2)


def _rotate_pairs(x: torch.Tensor) -> torch.Tensor:
    x = x.unflatten(-1, (-1, 2))
    return torch.stack((-x[..., 1], x[..., 0]), dim=-1).flatten(-2)


def rope_head0(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    d = angles.shape[-1]
    r = x[..., :d].float()
    r = r * angles.cos() + _rotate_pairs(r) * angles.sin()
    return torch.cat((r.to(x.dtype), x[..., d:]), dim=-1)


class Attn(nn.Module):
    def __init__(self, dim: int, heads: int, dim_head: int) -> None:
        super().__init__()
        inner = heads * dim_head
        self.to_q, self.to_k, self.to_v = nn.Linear(dim, inner), nn.Linear(dim, inner), nn.Linear(dim, inner)
        self.to_out = nn.ModuleList([nn.Linear(inner, dim), nn.Dropout(0.0)])


class AdaNorm(nn.Module):
    def __init__(self, dim: int, parts: int) -> None:
        super().__init__()
        self.linear = nn.Linear(dim, dim * parts)


class FeedForward(nn.Module):
    def __init__(self, dim: int, mult: int) -> None:
        super().__init__()
        inner = int(dim * mult)
        self.ff = nn.Sequential(
            nn.Sequential(nn.Linear(dim, inner), nn.GELU(approximate="tanh")),
            nn.Dropout(0.0),
            nn.Linear(inner, dim),
        )


class Block(nn.Module):
    def __init__(self, c: DiTConfig) -> None:
        super().__init__()
        self.attn_norm = AdaNorm(c.dim, 6)
        self.attn = Attn(c.dim, c.heads, c.dim_head)
        self.ff = FeedForward(c.dim, c.ff_mult)


def _ln(x: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, (x.shape[-1],), eps=1e-6)


@dataclass
class DiTCache:
    """What one Euler step of one batch row keeps for the frames already computed: per layer the
    (rotated) keys and values [T, heads*dim_head], and the last 30 inputs of each position convolution."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    tail1: torch.Tensor  # [30, dim] projection outputs (conv1's left context)
    tail2: torch.Tensor  # [30, dim] conv1 outputs (conv2's left context)

    @property
    def length(self) -> int:
        return int(self.keys[0].shape[0]) if self.keys else 0


class DiT(nn.Module):
    def __init__(self, c: DiTConfig) -> None:
        super().__init__()
        self.c = c
        self.time_embed = TimeMLP(c.dim)
        self.input_embed = InputEmbed(c)
        self.rotary_embed = RotaryFreqs(c.dim_head)
        self.transformer_blocks = nn.ModuleList(Block(c) for _ in range(c.depth))
        self.norm_out = AdaNorm(c.dim, 2)
        self.proj_out = nn.Linear(c.dim, c.mel_dim)

    def empty_cache(self, device: torch.device, dtype: torch.dtype) -> DiTCache:
        z = torch.zeros(0, self.c.heads * self.c.dim_head, device=device, dtype=dtype)
        t = torch.zeros(CONV_KERNEL - 1, self.c.dim, device=device, dtype=dtype)
        return DiTCache([z] * self.c.depth, [z] * self.c.depth, t, t)

    def _conv(self, conv: nn.Sequential, x: torch.Tensor, tails: torch.Tensor) -> torch.Tensor:
        """x [B, T, dim] with per-row left context tails [B, 30, dim] -> [B, T, dim]."""
        y = torch.cat([tails, x], dim=1).transpose(1, 2)
        return conv(y).transpose(1, 2)

    def forward(
        self,
        x: torch.Tensor,
        mu: torch.Tensor,
        cond: torch.Tensor,
        spks: torch.Tensor,
        t: torch.Tensor,
        lengths: list[int],
        caches: list[DiTCache],
        streaming: bool,
        keep: bool,
    ) -> tuple[torch.Tensor, list[DiTCache] | None]:
        """Velocity of the new frames. x, mu, cond [B, T, 80] (rows right-padded to T, `lengths` valid),
        spks [B, 80], t [B]. `caches[b]` holds row b's earlier frames (its length is the position of
        the first new frame). `streaming`: block-causal attention, else full. `keep`: also return each
        row's cache extended by its new valid frames (for a later chunk)."""
        c = self.c
        B, T, _ = x.shape
        dev = x.device
        temb = self.time_embed(t)
        h = self.input_embed.proj(torch.cat([x, cond, mu, spks[:, None].expand(B, T, spks.shape[-1])], -1))
        t1 = torch.stack([cc.tail1 for cc in caches])
        t2 = torch.stack([cc.tail2 for cc in caches])
        pe = self.input_embed.conv_pos_embed
        c1 = self._conv(pe.conv1, h, t1)
        c2 = self._conv(pe.conv2, c1, t2)
        new_tails = (torch.cat([t1, h], 1), torch.cat([t2, c1], 1)) if keep else None
        h = c2 + h
        past = [cc.length for cc in caches]
        P = max(past)
        q_pos = torch.tensor(past, device=dev)[:, None] + torch.arange(T, device=dev)[None]
        angles = self.rotary_embed(q_pos)
        # keys: [past (padded to P) | new (padded to T)]; key positions, -1 = padding
        kpos = torch.full((B, P + T), -1, dtype=torch.long, device=dev)
        for b, (n_past, n_new) in enumerate(zip(past, lengths, strict=True)):
            kpos[b, :n_past] = torch.arange(n_past, device=dev)
            kpos[b, P : P + n_new] = torch.arange(n_past, n_past + n_new, device=dev)
        visible = kpos[:, None, :] >= 0
        if streaming:
            block = c.static_chunk_size
            limit = (q_pos // block + 1) * block
            visible = visible & (kpos[:, None, :] < limit[:, :, None])
        mask = visible[:, None]  # [B, 1, T, P+T]
        inner = c.heads * c.dim_head
        new_k: list[torch.Tensor] = []
        new_v: list[torch.Tensor] = []
        for li, blk in enumerate(self.transformer_blocks):
            e = blk.attn_norm.linear(F.silu(temb))
            sh_a, sc_a, g_a, sh_m, sc_m, g_m = torch.chunk(e, 6, dim=1)
            n = _ln(h) * (1 + sc_a[:, None]) + sh_a[:, None]
            a = blk.attn
            q = rope_head0(a.to_q(n), angles)
            k = rope_head0(a.to_k(n), angles)
            v = a.to_v(n)
            if P:
                pk = torch.zeros(B, P, inner, device=dev, dtype=k.dtype)
                pv = torch.zeros(B, P, inner, device=dev, dtype=v.dtype)
                for b, cc in enumerate(caches):
                    pk[b, : past[b]] = cc.keys[li]
                    pv[b, : past[b]] = cc.values[li]
                kk, vv = torch.cat([pk, k], 1), torch.cat([pv, v], 1)
            else:
                kk, vv = k, v
            if keep:
                new_k.append(k)
                new_v.append(v)
            split = (B, -1, c.heads, c.dim_head)
            o = F.scaled_dot_product_attention(
                q.view(split).transpose(1, 2),
                kk.view(split).transpose(1, 2),
                vv.view(split).transpose(1, 2),
                attn_mask=mask,
            )
            o = a.to_out[0](o.transpose(1, 2).reshape(B, T, inner))
            h = h + g_a[:, None] * o
            m = _ln(h) * (1 + sc_m[:, None]) + sh_m[:, None]
            h = h + g_m[:, None] * blk.ff.ff(m)
        scale, shift = torch.chunk(self.norm_out.linear(F.silu(temb)), 2, dim=1)
        out = self.proj_out(_ln(h) * (1 + scale)[:, None] + shift[:, None])
        if not keep:
            return out, None
        kept = []
        for b, cc in enumerate(caches):
            n_new = lengths[b]
            s = CONV_KERNEL - 1
            kept.append(
                DiTCache(
                    [torch.cat([cc.keys[li], new_k[li][b, :n_new]]) for li in range(c.depth)],
                    [torch.cat([cc.values[li], new_v[li][b, :n_new]]) for li in range(c.depth)],
                    new_tails[0][b, n_new : n_new + s],
                    new_tails[1][b, n_new : n_new + s],
                )
            )
        return out, kept
