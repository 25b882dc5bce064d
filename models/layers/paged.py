"""The paged KV pool as the LM sees it, and the one attention forward over it.

A pool holds one layer's K (or V) as [pages, page_size, kv_heads, head_dim]; a row of the batch owns a list
of pages (its block table). `paged_attention` writes this step's K/V into the rows' slots, gathers each
row's pages back through the block table and runs SDPA with the batch's mask (grouped-query attention when
there are fewer KV heads than query heads). Every family's self-attention over the pool goes through it;
what differs between families (projections, norms, rotary) happens before the call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
import torch.nn.functional as F


@dataclass
class PagedBatch:
    """Where each token of a flattened batch goes in the paged pool and what it may attend to.

    Queries are laid out [B, Tq] (right-padded); `q_pos[b, i]` is the absolute position of query i of
    row b; `slots[b, i]` is its flat pool index (page * page_size + offset), -1 for padding.
    `block_table [B, P]` lists each row's pages (padded with any page the row may read); `kv_len[b]` is
    the row's length after this step. Key j of row b is visible to query i iff j <= q_pos[b, i] and
    j < kv_len[b]."""

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


class PageSlots(Protocol):
    """What `paged_attention` reads of a batch: where this step's K/V go and each row's pages."""

    @property
    def slots(self) -> torch.Tensor: ...

    @property
    def block_table(self) -> torch.Tensor: ...

    @property
    def page_size(self) -> int: ...


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, *,
           causal: bool = False, scale: float | None = None) -> torch.Tensor:
    """q [B, Tq, H, hd], k/v [B, Tk, KVH, hd] (cast to q's dtype: a pool may be stored wider) ->
    [B, Tq, H*hd]. `scale` None is 1/sqrt(hd); Dia is trained unscaled (1.0)."""
    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2).to(q.dtype), v.transpose(1, 2).to(q.dtype)
    out = F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, is_causal=causal, scale=scale,
                                         enable_gqa=qt.shape[1] != kt.shape[1])
    return out.transpose(1, 2).reshape(out.shape[0], out.shape[2], -1)


def paged_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, k_pool: torch.Tensor,
                    v_pool: torch.Tensor, pb: PageSlots, mask: torch.Tensor, *,
                    scale: float | None = None) -> torch.Tensor:
    """Write k/v [B, Tq, KVH, hd] into their slots of one layer's pools, attend q [B, Tq, H, hd] over
    each row's pages under `mask` [B, 1, Tq, P*page_size] -> [B, Tq, H*hd]."""
    kv_heads, hd = k.shape[-2], k.shape[-1]
    flat_k = k_pool.view(-1, kv_heads, hd)
    flat_v = v_pool.view(-1, kv_heads, hd)
    valid = pb.slots >= 0
    idx = pb.slots[valid]
    flat_k[idx] = k[valid].to(flat_k.dtype)
    flat_v[idx] = v[valid].to(flat_v.dtype)
    B, P = pb.block_table.shape
    keys = k_pool[pb.block_table].view(B, P * pb.page_size, kv_heads, hd)
    vals = v_pool[pb.block_table].view(B, P * pb.page_size, kv_heads, hd)
    return attend(q, keys, vals, mask, scale=scale)
