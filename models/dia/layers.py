"""Dia's transformer blocks in plain PyTorch, with the transformers parameter names (the checkpoint's
state dict loads as-is: `model.encoder.*`, `model.decoder.*`, `logits_dense.weight`).

Facts taken from the reference implementation: attention is UNscaled (softmax(q k^T), scaling = 1) in
the encoder, the decoder self-attention and the cross-attention; RoPE (half-split rotate_half, fp32
tables) on encoder and decoder self-attention only; the MLP is one fused `gate_up_proj` (gate first);
the decoder embeds the 9 channels with one table offset by channel * vocab and sums them. The
self-attention (projections, RoPE, the paged forward) and the fused MLP are the layer library's; the
cross-attention is Dia's.

Decoder self-attention K/V and the cross-attention K/V both live in the engine's paged pool (see
program.py for the layout); `PagedKV` says where each row's positions and cross keys are.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..layers import Attention, FusedSwiGLU, RMSNorm, Rope, Rotary
from ..layers import attend as library_attend
from .config import DecoderConfig, DiaConfig, EncoderConfig

DIA_SCALE = 1.0  # softmax(q k^T): no 1/sqrt(head_dim) anywhere in Dia


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """q [B, Tq, H, hd], k/v [B, Tk, KVH, hd] -> [B, Tq, H*hd]; unscaled, as Dia is trained."""
    return library_attend(q, k, v, mask, scale=DIA_SCALE)


def self_attention(c: EncoderConfig | DecoderConfig) -> Attention:
    """Dia's self-attention: the layer library's, unscaled, without q/k norm or biases."""
    return Attention(c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim, qk_norm=False,
                     scale=DIA_SCALE)


class Projections(nn.Module):
    """The cross-attention's projections (keys and values from the encoder's width)."""

    def __init__(
        self, hidden: int, heads: int, kv_heads: int, head_dim: int, kv_in: int | None = None
    ) -> None:
        super().__init__()
        kv_in = hidden if kv_in is None else kv_in
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.q_proj = nn.Linear(hidden, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(kv_in, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(kv_in, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False)

    def split(self, proj: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        return proj(x).view(*x.shape[:-1], -1, self.head_dim)


# --- encoder ---------------------------------------------------------------------------------------
class EncoderLayer(nn.Module):
    def __init__(self, c: EncoderConfig) -> None:
        super().__init__()
        self.pre_sa_norm = RMSNorm(c.hidden_size, c.norm_eps)
        self.self_attention = self_attention(c)
        self.post_sa_norm = RMSNorm(c.hidden_size, c.norm_eps)
        self.mlp = FusedSwiGLU(c.hidden_size, c.intermediate_size)

    def forward(self, x, cos, sin, mask):
        a = self.self_attention
        q, k, v = a.project(self.pre_sa_norm(x), cos, sin)
        x = x + a.o_proj(attend(q, k, v, mask))
        return x + self.mlp(self.post_sa_norm(x))


class Encoder(nn.Module):
    def __init__(self, c: EncoderConfig) -> None:
        super().__init__()
        self.embedding = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(EncoderLayer(c) for _ in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.norm_eps)
        self.rotary = Rotary(c.head_dim, Rope(theta=float(c.rope_theta)))

    def forward(self, ids: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """ids [B, T] (right-padded); mask [B, 1, T, T] bool or None (no padding)."""
        x = self.embedding(ids)
        pos = torch.arange(ids.shape[1], device=ids.device)[None].expand(ids.shape[0], -1)
        cos, sin = self.rotary(pos, x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.norm(x)


# --- decoder ---------------------------------------------------------------------------------------
@dataclass
class PagedKV:
    """Where a batch of decoder sequences keeps its K/V in the paged pool.

    Self-attention: queries are [B, Tq] (right-padded); `slots[b, i]` is the flat pool position
    (page * page_size + offset) query i writes, -1 for padding; `self_table [B, P]` lists the sequence's
    self-KV pages; key j is visible to query i iff j <= q_pos[b, i] and j < kv_len[b].
    Cross-attention: `cross_table [B, Pc]` lists the pages holding the sequence's encoder K/V, packed
    densely (token-major, [tokens, cross_kv_heads, cross_head_dim]) across those pages; `cross_len[b]`
    tokens are valid."""

    q_pos: torch.Tensor
    slots: torch.Tensor
    self_table: torch.Tensor
    kv_len: torch.Tensor
    cross_table: torch.Tensor
    cross_len: torch.Tensor
    page_size: int
    # Optional per layer (K, V) [B, max cross_len, heads, hd] already gathered from the cross pages (the
    # program reuses them while a decode batch keeps its members), or a shared_cross.CrossPlan (CFG pairs'
    # shared unconditional sequences add one constant per layer); None = gather in the layer.
    cross_dense: list | None = None
    # Optional (n, source) for layer 0: only the first n sequences run its self-attention, sequence i
    # takes the result of sequence source[i] < n. A CFG pair's two sequences read the same tokens, and
    # layer 0's self-attention
    # sees nothing else (its keys and values come from the token embeddings alone), so the unconditional
    # sequence's layer-0 self-attention IS its conditional partner's; its layer-0 self K/V is never
    # written or read (DiaState.shared, fixed at the request's prefill).
    first_layer_reuse: tuple[int, torch.Tensor] | None = None

    @property
    def block_table(self) -> torch.Tensor:
        """The self-attention pages, under the name the layer library's `paged_attention` reads."""
        return self.self_table

    def head(self, n: int) -> PagedKV:
        """The self-attention view of the first n sequences (cross fields kept whole: not read there)."""
        return PagedKV(self.q_pos[:n], self.slots[:n], self.self_table[:n], self.kv_len[:n],
                       self.cross_table, self.cross_len, self.page_size)

    def self_mask(self) -> torch.Tensor:
        n = self.self_table.shape[1] * self.page_size
        j = torch.arange(n, device=self.q_pos.device)
        m = (j[None, None, :] <= self.q_pos[:, :, None]) & (j[None, None, :] < self.kv_len[:, None, None])
        m[..., 0] |= ~m.any(-1)  # padded queries see key 0 (no NaN); their outputs are dropped
        return m[:, None]

    def cross_mask(self, tq: int) -> torch.Tensor | None:
        n = int(self.cross_len.max())
        if bool((self.cross_len == n).all()):
            return None  # every sequence sees all its keys: no mask, as the reference's batch of one
        j = torch.arange(n, device=self.cross_len.device)
        return (j[None, :] < self.cross_len[:, None])[:, None, None, :].expand(-1, 1, tq, -1)


def pack_cross(kv: torch.Tensor, page_elems: int) -> torch.Tensor:
    """[T, heads, hd] -> [pages, page_elems] (zero-padded), the dense layout `gather_cross` reads back."""
    flat = kv.reshape(-1)
    n = -(-flat.numel() // page_elems)
    out = flat.new_zeros(n * page_elems)
    out[: flat.numel()] = flat
    return out.view(n, page_elems)


def gather_cross(pool: torch.Tensor, table: torch.Tensor, n_tokens: int, heads: int, hd: int) -> torch.Tensor:
    """One layer's pool [pages, ps, kvh, hd], table [B, Pc] -> [B, n_tokens, heads, hd]."""
    B = table.shape[0]
    flat = pool[table].reshape(B, -1)
    return flat[:, : n_tokens * heads * hd].view(B, n_tokens, heads, hd)


class DecoderLayer(nn.Module):
    def __init__(self, c: DecoderConfig) -> None:
        super().__init__()
        self.self_attention = self_attention(c)
        self.cross_attention = Projections(
            c.hidden_size,
            c.cross_num_attention_heads,
            c.cross_num_key_value_heads,
            c.cross_head_dim,
            kv_in=c.cross_hidden_size,
        )
        self.pre_sa_norm = RMSNorm(c.hidden_size, c.norm_eps)
        self.pre_ca_norm = RMSNorm(c.hidden_size, c.norm_eps)
        self.pre_mlp_norm = RMSNorm(c.hidden_size, c.norm_eps)
        self.mlp = FusedSwiGLU(c.hidden_size, c.intermediate_size)

    def cross_kv(self, enc: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a = self.cross_attention
        return a.split(a.k_proj, enc), a.split(a.v_proj, enc)

    def gather_cross_kv(self, k_pool, v_pool, pk: PagedKV) -> tuple[torch.Tensor, torch.Tensor]:
        c = self.cross_attention
        n = int(pk.cross_len.max())
        return (
            gather_cross(k_pool, pk.cross_table, n, c.kv_heads, c.head_dim),
            gather_cross(v_pool, pk.cross_table, n, c.kv_heads, c.head_dim),
        )

    def forward(self, x, cos, sin, k_pool, v_pool, pk: PagedKV, self_mask, cross_mask, cross=None,
                reuse: tuple[int, torch.Tensor] | None = None):
        """`reuse` (n, source): only the first n sequences run the self-attention; sequence i takes the
        result of sequence source[i] (a CFG pair's unconditional sequence at layer 0, see PagedKV)."""
        if reuse is None:
            x = x + self.self_attend(x, cos, sin, k_pool, v_pool, pk, self_mask)
        else:
            n, source = reuse
            own = self.self_attend(x[:n], cos[:n], sin[:n], k_pool, v_pool, pk.head(n), self_mask[:n])
            x = x + own[source]

        return self._finish(self.cross_attend(x, k_pool, v_pool, pk, cross_mask, cross))

    def cross_attend(self, x, k_pool, v_pool, pk: PagedKV, cross_mask, cross=None) -> torch.Tensor:
        """x + o_proj(cross attention over the encoder K/V)."""
        if cross is not None and not isinstance(cross, tuple):  # a shared_cross.CrossPlan
            return cross.apply(self, x)
        c = self.cross_attention
        h = self.pre_ca_norm(x)
        q = c.split(c.q_proj, h)
        ck, cv = cross if cross is not None else self.gather_cross_kv(k_pool, v_pool, pk)
        return x + c.o_proj(attend(q, ck.to(q.dtype), cv.to(q.dtype), cross_mask))

    def self_attend(self, x, cos, sin, k_pool, v_pool, pk: PagedKV, self_mask) -> torch.Tensor:
        """Write the batch's new self K/V into the pool, return o_proj(self-attention) [B, T, hidden]."""
        return self.self_attention.forward_paged(self.pre_sa_norm(x), cos, sin, k_pool, v_pool, pk, self_mask)

    def _finish(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.pre_mlp_norm(x))


class ChannelEmbedding(nn.Module):
    def __init__(self, c: DecoderConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(c.vocab_size * c.num_channels, c.hidden_size)
        self.vocab = c.vocab_size

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens [B, T, C] -> [B, T, H] (sum over channels)."""
        off = torch.arange(tokens.shape[-1], device=tokens.device) * self.vocab
        return self.embed(tokens + off).sum(dim=2)


class Decoder(nn.Module):
    def __init__(self, c: DecoderConfig) -> None:
        super().__init__()
        self.embeddings = ChannelEmbedding(c)
        self.layers = nn.ModuleList(DecoderLayer(c) for _ in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.norm_eps)
        self.rotary = Rotary(c.head_dim, Rope(theta=float(c.rope_theta)))

    def forward(self, tokens, k_pools, v_pools, pk: PagedKV) -> torch.Tensor:
        x = self.embeddings(tokens)
        cos, sin = self.rotary(pk.q_pos, x.dtype)
        self_mask, cross_mask = pk.self_mask(), pk.cross_mask(tokens.shape[1])
        dense = pk.cross_dense
        for i, layer in enumerate(self.layers):
            cross = dense[i] if dense is not None else None
            reuse = pk.first_layer_reuse if i == 0 else None
            x = layer(x, cos, sin, k_pools[i], v_pools[i], pk, self_mask, cross_mask, cross, reuse)
        return self.norm(x)


class DiaModel(nn.Module):
    def __init__(self, cfg: DiaConfig) -> None:
        super().__init__()
        self.encoder = Encoder(cfg.encoder)
        self.decoder = Decoder(cfg.decoder)


class DiaWeights(nn.Module):
    """The whole checkpoint: `model.{encoder,decoder}` + `logits_dense` (channels * vocab outputs)."""

    def __init__(self, cfg: DiaConfig) -> None:
        super().__init__()
        d = cfg.decoder
        self.model = DiaModel(cfg)
        self.logits_dense = nn.Linear(d.hidden_size, d.num_channels * d.vocab_size, bias=False)
        self.channels, self.vocab = d.num_channels, d.vocab_size

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., H] -> [..., C, V]."""
        return self.logits_dense(hidden).view(*hidden.shape[:-1], self.channels, self.vocab)
