"""Kyutai TTS's LM (moshi `LMModel` as tts-1.6b-en_fr configures it) under moshi's own parameter names (the
stacked `in_proj_weight` / `out_proj.weight` of the release split per weight set on load, checkpoint.py):

* embeddings: one table per audio codebook (`emb.N`, card + 1 rows: the initial token), the text table
  (`text_emb`, text_card + 1 rows) read through `out1` / `out2` for the two multiplexed text streams
  (token = (second + 1) * (text_card + 1) + first); id -1 embeds to exactly 0;
* the main transformer: RMSNorm in float32 (eps 1e-8), fused q/k/v with interleaved RoPE, causal attention
  over the last `context` positions (on the engine's paged KV pool), cross-attention (LayerNorm, no mask,
  no RoPE) over the speaker conditioning, a SiLU-gated MLP; `out_norm`, then `text_linear`;
* the depformer (depth transformer): per frame, codebook q runs step q of a 32-step causal transformer with
  weight set `schedule[q]` in every projection and MLP, input `depformer_in[schedule[q]](h)` plus the
  previous token's low-rank embedding (the text token's, demuxed, for q = 0); `linears[q]` scores it;
* conditioners: `control` and `cfg` lookup tables (plus a learnt padding for an absent value) summed into
  every step's input, `speaker_wavs` projected (+ learnt padding for empty speaker slots, + sinusoidal
  positions) as the cross-attention source.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..layers import RMSNormF32, sin_embedding
from .config import KyutaiConfig


class Gating(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.linear_in = nn.Linear(dim, 2 * hidden, bias=False)
        self.linear_out = nn.Linear(hidden, dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear_in(x).unflatten(-1, (2, -1))
        return self.linear_out(F.silu(h[..., 0, :]) * h[..., 1, :])


class Proj(nn.Module):
    """`in_projs.N` / `out_projs.N`: moshi's per-weight-set linear layers."""

    def __init__(self, dim: int, sets: int) -> None:
        super().__init__()
        self.in_projs = nn.ModuleList([nn.Linear(dim, 3 * dim, bias=False) for _ in range(sets)])
        self.out_projs = nn.ModuleList([nn.Linear(dim, dim, bias=False) for _ in range(sets)])


class Embedding(nn.Module):
    """moshi's ScaledEmbedding: -1 -> 0; optional low rank; optional demux of two text streams."""

    def __init__(self, rows: int, dim: int, low_rank: int | None = None, demux: bool = False) -> None:
        super().__init__()
        self.rows = rows
        self.weight = nn.Parameter(torch.empty(rows, low_rank or dim))
        self.low_rank = nn.Linear(low_rank, dim, bias=False) if low_rank else None
        self.demux = demux
        if demux:
            self.out1 = nn.Linear(low_rank or dim, dim, bias=False)
            self.out2 = nn.Linear(low_rank or dim, dim, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        zero = (ids == -1)[..., None]
        ids = ids.clamp(min=0)
        if self.demux:
            first, second = ids % self.rows, ids // self.rows - 1
            y = self.out1(F.embedding(first, self.weight))
            y2 = self.out2(F.embedding(second.clamp(min=0), self.weight))
            y = y + torch.where((second < 0)[..., None], torch.zeros_like(y2), y2)
            return torch.where(zero, torch.zeros_like(y), y)
        y = F.embedding(ids, self.weight)
        y = torch.where(zero, torch.zeros_like(y), y)
        return self.low_rank(y) if self.low_rank is not None else y


class MainLayer(nn.Module):
    def __init__(self, c: KyutaiConfig) -> None:
        super().__init__()
        self.self_attn = Proj(c.dim, 1)
        self.norm1 = RMSNormF32(c.dim)
        self.norm2 = RMSNormF32(c.dim)
        self.gating = Gating(c.dim, c.ffn_hidden)
        self.cross_attention = Proj(c.dim, 1)
        self.norm_cross = nn.LayerNorm(c.dim, eps=1e-5)


class DepLayer(nn.Module):
    def __init__(self, c: KyutaiConfig) -> None:
        super().__init__()
        self.self_attn = Proj(c.dep_dim, c.weight_sets)
        self.norm1 = RMSNormF32(c.dep_dim)
        self.norm2 = RMSNormF32(c.dep_dim)
        self.gating = nn.ModuleList([Gating(c.dep_dim, c.dep_ffn_hidden) for _ in range(c.weight_sets)])


class Transformer(nn.Module):
    def __init__(self, layers: list[nn.Module]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)


class Lut(nn.Module):
    def __init__(self, n_bins: int, dim: int, out: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(n_bins + 1, dim)
        self.output_proj = nn.Linear(dim, out, bias=False)
        self.learnt_padding = nn.Parameter(torch.zeros(1, 1, out))

    def value(self, index: int | None) -> torch.Tensor:
        """[out] float32: the row for `index`, or the learnt padding for an absent value (None)."""
        if index is None:
            return self.learnt_padding[0, 0].float()
        # in the projection's own dtype, as the speaker projection below and moshi's LUT run under bf16
        return self.output_proj(self.embed.weight[index].to(self.output_proj.weight.dtype)).float()


class SpeakerConditioner(nn.Module):
    def __init__(self, dim_in: int, out: int) -> None:
        super().__init__()
        self.output_proj = nn.Linear(dim_in, out, bias=False)
        self.learnt_padding = nn.Parameter(torch.zeros(1, 1, out))


class Conditioners(nn.Module):
    def __init__(self, c: KyutaiConfig) -> None:
        super().__init__()
        self.conditioners = nn.ModuleDict(
            {
                "speaker_wavs": SpeakerConditioner(c.speaker_dim, c.dim),
                "cfg": Lut(len(c.cfg_values), 16, c.dim),
                "control": Lut(1, c.dim, c.dim),
            }
        )


class KyutaiLM(nn.Module):
    def __init__(self, c: KyutaiConfig) -> None:
        super().__init__()
        self.cfg = c
        self.emb = nn.ModuleList([Embedding(c.card + 1, c.dim) for _ in range(c.n_q)])
        self.text_emb = Embedding(c.text_card + 1, c.dim, demux=True)
        self.text_linear = nn.Linear(c.dim, c.text_card, bias=False)
        self.transformer = Transformer([MainLayer(c) for _ in range(c.num_layers)])
        self.out_norm = RMSNormF32(c.dim)
        self.depformer_in = nn.ModuleList(
            [nn.Linear(c.dim, c.dep_dim, bias=False) for _ in range(c.weight_sets)]
        )
        self.depformer_emb = nn.ModuleList(
            [Embedding(c.card + 1, c.dep_dim, c.dep_low_rank) for _ in range(c.n_q - 1)]
        )
        self.depformer_text_emb = Embedding(c.text_card + 1, c.dep_dim, c.dep_low_rank, demux=True)
        self.depformer = Transformer([DepLayer(c) for _ in range(c.dep_layers)])
        self.linears = nn.ModuleList([nn.Linear(c.dep_dim, c.card, bias=False) for _ in range(c.n_q)])
        self.condition_provider = Conditioners(c)

    # --- conditioning (per request, once) ---------------------------------------------------------
    def condition_sum(self, cfg_index: int | None) -> torch.Tensor:
        """control ("ok") + cfg (its value's row, or the padding when absent): [dim] float32."""
        conds = self.condition_provider.conditioners
        return conds["control"].value(0) + conds["cfg"].value(cfg_index)

    def cross_kv(self, speaker: torch.Tensor, max_speakers: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """speaker_wavs [512, T] of one voice -> per main layer the cross-attention K, V [H, S, D] (S =
        max_speakers * T: the voice in slot 0, the learnt padding in the empty slots)."""
        c = self.cfg
        cond = self.condition_provider.conditioners["speaker_wavs"]
        t = speaker.shape[-1]
        proj = cond.output_proj(speaker.T.float()[None].to(cond.output_proj.weight.dtype)).float()
        pad = cond.learnt_padding.float().expand(1, (max_speakers - 1) * t, c.dim)
        src = torch.cat([proj, pad], dim=1)
        if c.cross_pos_scale:
            src = src + c.cross_pos_scale * sin_embedding(src.shape[1], c.dim).to(src.device)
        dtype = self.text_linear.weight.dtype
        src = src.to(dtype)
        out = []
        for layer in self.transformer.layers:
            w = layer.cross_attention.in_projs[0].weight
            kv = F.linear(src, w[c.dim :])[0].view(src.shape[1], 2, c.num_heads, -1).permute(1, 2, 0, 3)
            out.append((kv[0].contiguous(), kv[1].contiguous()))
        return out
