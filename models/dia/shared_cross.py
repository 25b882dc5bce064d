"""Work the unconditional sequences of CFG pairs share, exactly (issue 17 part 6).

Dia's unconditional sequence reads the text encoder's output for an all-zero text of the SAME length
as the request's text (program.py `_encode`, as the reference forms the pair). That input depends on
the length L alone, so for every request of one text length the unconditional encoder output, and the
cross-attention K/V of every decoder layer computed from it, are the same tensors. Two consequences:

* prefill runs the encoder (and the cross K/V projections) once per distinct L in the batch for all
  its unconditional sequences, instead of once per request (program.py `_encode`);
* decode reads one copy of the shared cross K/V per distinct L: the unconditional sequences of a
  length group attend to it together, their queries folded into one query axis (`CrossPlan.attend`),
  so the keys and values are read once per group and step instead of once per sequence, and the
  dense copy the program keeps per decode batch holds one [L, heads, hd] per group, not per request.

* within a pair, layer 0's self-attention: both sequences feed the same tokens and layer 0 sees only
  their embeddings, so the unconditional sequence reuses its partner's result (layers.py PagedKV
  `first_layer_reuse`; its layer-0 self K/V is neither written nor read).

Each unconditional sequence still owns its cross pages, written with the shared values: admission,
page accounting and fault isolation's re-runnable prefill are unchanged, and any one sequence's pages
hold its complete K/V (the decode group reads the first member's).

Exactness: per query, the folded attention computes the same softmax(q K^T) V over the same keys as
the per-sequence one; the float summation order inside the attention kernel may differ with the
query count, so logits agree to float rounding (tests/test_dia_shared_cross.py bounds the difference
at 1e-5 relative and pins greedy codes bit-equal with sharing on and off, alone and among others)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .layers import attend, gather_cross


@dataclass
class CrossPlan:
    """One decoder layer's cross K/V for a batch whose unconditional sequences share by text length.

    `own` indexes the sequences that read their own K/V (conditional ones and width-1 rows),
    `own_k/own_v` [n_own, max len, kv_heads, hd] with `own_len` valid tokens each; every entry of
    `groups` is (sequence indices, K [1, L, kv_heads, hd], V) for the unconditional sequences of one
    text length L."""

    own: torch.Tensor
    own_k: torch.Tensor | None
    own_v: torch.Tensor | None
    own_len: torch.Tensor
    groups: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]

    def attend(self, q: torch.Tensor) -> torch.Tensor:
        """q [S, T, heads, hd] -> [S, T, heads * hd], the cross attention of every sequence."""
        S, T, H, hd = q.shape
        out = q.new_empty(S, T, H * hd)
        if self.own_k is not None:
            out[self.own] = attend(q[self.own], self.own_k.to(q.dtype), self.own_v.to(q.dtype),
                                   _length_mask(self.own_len, T))
        for idx, k, v in self.groups:
            # cross attention has no per-query mask and every member sees all L keys: fold the
            # group's sequences into one query axis against the one shared K/V
            folded = q[idx].reshape(1, idx.numel() * T, H, hd)
            out[idx] = attend(folded, k.to(q.dtype), v.to(q.dtype), None).view(idx.numel(), T, H * hd)
        return out


def _length_mask(lengths: torch.Tensor, tq: int) -> torch.Tensor | None:
    """As PagedKV.cross_mask, over a subset of sequences."""
    n = int(lengths.max())
    if bool((lengths == n).all()):
        return None
    j = torch.arange(n, device=lengths.device)
    return (j[None, :] < lengths[:, None])[:, None, None, :].expand(-1, 1, tq, -1)


def plan_groups(uncond: list[bool], lengths: list[int]) -> tuple[list[int], dict[int, list[int]]]:
    """Sequence indices that read their own cross K/V, and the unconditional ones by text length."""
    own = [i for i, u in enumerate(uncond) if not u]
    groups: dict[int, list[int]] = {}
    for i, (u, n) in enumerate(zip(uncond, lengths, strict=True)):
        if u:
            groups.setdefault(n, []).append(i)
    return own, groups


def build_plans(layers, k_pool: torch.Tensor, v_pool: torch.Tensor, cross_table: torch.Tensor,
                uncond: list[bool], lengths: list[int]) -> list[CrossPlan]:
    """Per decoder layer, the dense cross K/V of a batch (`cross_table` [S, Pc] as in PagedKV):
    the own sequences' gathered from their pages, one per length group from its first member's."""
    dev = cross_table.device
    own, groups = plan_groups(uncond, lengths)
    own_idx = torch.tensor(own, dtype=torch.long, device=dev)
    own_len = torch.tensor([lengths[i] for i in own], dtype=torch.long, device=dev)
    n_own = max((lengths[i] for i in own), default=0)
    plans = []
    for li, layer in enumerate(layers):
        c = layer.cross_attention
        heads, hd = c.kv_heads, c.head_dim
        own_k = own_v = None
        if own:
            table = cross_table[own_idx]
            own_k = gather_cross(k_pool[li], table, n_own, heads, hd)
            own_v = gather_cross(v_pool[li], table, n_own, heads, hd)
        grouped = []
        for n, members in groups.items():
            first = cross_table[members[0] : members[0] + 1]
            grouped.append((
                torch.tensor(members, dtype=torch.long, device=dev),
                gather_cross(k_pool[li], first, n, heads, hd),
                gather_cross(v_pool[li], first, n, heads, hd),
            ))
        plans.append(CrossPlan(own_idx, own_k, own_v, own_len, grouped))
    return plans
