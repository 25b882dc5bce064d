"""Work the unconditional sequences of CFG pairs share, exactly (issue 17 part 6).

Dia's unconditional sequence reads the text encoder's output for an all-zero text of the SAME length L
as the request's text (transformers' DiaGenerationMixin: `torch.zeros_like(input_ids)`, the same
attention mask). Two identities follow from the architecture alone, for any weights:

1. The encoder's output for an all-zero text is ONE vector at every position, whatever L. By induction
   over the layers: every position enters with the same embedding; RoPE rotates q and k but not v, so
   each position's attention output is a convex combination of L equal values, i.e. that value; the
   norms and the MLP act per position.
2. Hence every decoder layer's unconditional cross K and V are one vector each, repeated L times. The
   cross-attention has no RoPE and no mask over a text, so every score is the same, the softmax is
   uniform and the output is V, for ANY query: layer l's unconditional cross-attention block adds one
   constant c_l = o_proj(V_l) to the residual stream, whatever the request, its text, the step or the
   position (`uncond_constants`: the encoder over ONE zero token, where the softmax over one key is 1).

So a shared unconditional sequence (`DiaState.shared`) runs no encoder at prefill, holds no cross pages
(`kv_tokens`), and at every step and layer takes x + c_l instead of norm, q_proj, attention over L keys
and o_proj (`CrossPlan.apply`). And within a pair, layer 0's self-attention: both sequences feed the
same tokens and layer 0 sees only their embeddings, so the unconditional sequence reuses its partner's
result (layers.py PagedKV `first_layer_reuse`; its layer-0 self K/V is neither written nor read).

Exactness: both identities hold in exact arithmetic. In floating point the reference's positions differ
by rounding (the all-zero encoder output varies by <= 1.5e-6 across positions and lengths at |x| ~ 3 on
the bench model), as does any GEMM over a different row subset, so hidden states agree to float
rounding; tests/test_dia_shared_cross.py bounds them at 1e-5 relative and pins the codes bit-equal with
the sharing on and off, alone and among others, greedy and sampled."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .layers import attend, gather_cross


@dataclass
class CrossPlan:
    """One decoder layer's cross attention for a batch holding shared unconditional sequences.

    The first `n_own` sequences attend to their own encoder K/V (conditional ones, width-1 rows,
    unshared unconditional ones), `own_k/own_v` [n_own, max len, kv_heads, hd] with `own_len` valid
    tokens each; every later one (program.py orders them so) adds `constant` [hidden], the layer's c_l."""

    n_own: int
    own_k: torch.Tensor | None
    own_v: torch.Tensor | None
    own_len: torch.Tensor
    ragged: bool  # the own lengths differ (a mask is needed)
    constant: torch.Tensor
    masks: dict[int, torch.Tensor] = field(default_factory=dict)  # by query length (the plan outlives a step)

    def apply(self, layer, x: torch.Tensor) -> torch.Tensor:
        """x [S, T, hidden] -> x + the cross-attention block's output, for every sequence."""
        n = self.n_own
        if n == 0:
            return x + self.constant
        out = torch.empty_like(x)
        torch.add(x[n:], self.constant, out=out[n:])
        xo = x[:n]
        c = layer.cross_attention
        q = c.split(c.q_proj, layer.pre_ca_norm(xo))
        mask = None
        if self.ragged:
            mask = self.masks.get(x.shape[1])
            if mask is None:
                mask = self.masks[x.shape[1]] = _length_mask(self.own_len, x.shape[1])
        att = attend(q, self.own_k.to(q.dtype), self.own_v.to(q.dtype), mask)
        torch.add(xo, c.o_proj(att), out=out[:n])
        return out


def _length_mask(lengths: torch.Tensor, tq: int) -> torch.Tensor:
    """As PagedKV.cross_mask, over a subset of sequences of different lengths."""
    n = int(lengths.max())
    j = torch.arange(n, device=lengths.device)
    return (j[None, :] < lengths[:, None])[:, None, None, :].expand(-1, 1, tq, -1)


@torch.inference_mode()
def uncond_constants(weights) -> list[torch.Tensor]:
    """Per decoder layer, c_l [hidden]: the cross-attention block's output for an unconditional sequence
    (identity 2 above), from the encoder over one zero token."""
    p = next(weights.parameters())
    enc = weights.model.encoder(torch.zeros(1, 1, dtype=torch.long, device=p.device), None)
    out = []
    for layer in weights.model.decoder.layers:
        c = layer.cross_attention
        k, v = layer.cross_kv(enc)  # [1, 1, kv_heads, hd]
        q = torch.zeros(1, 1, c.heads, c.head_dim, dtype=p.dtype, device=p.device)  # any query: one key
        out.append(c.o_proj(attend(q, k, v, None))[0, 0])
    return out


def build_plans(layers, k_pool: torch.Tensor, v_pool: torch.Tensor, cross_table: torch.Tensor,
                n_own: int, lengths: list[int], constants: list[torch.Tensor]) -> list[CrossPlan]:
    """Per decoder layer, the plan of a batch whose first `n_own` sequences attend to their own encoder
    K/V (`lengths`: their text lengths; `cross_table` [S, Pc] as in PagedKV, the later rows never read):
    those sequences' dense K/V gathered from their pages, the shared ones' constant."""
    dev = cross_table.device
    own_len = torch.tensor(lengths, dtype=torch.long, device=dev)
    longest = max(lengths, default=0)
    table = cross_table[:n_own]
    masks: dict[int, torch.Tensor] = {}  # one per query length, shared by every layer's plan
    plans = []
    for li, layer in enumerate(layers):
        c = layer.cross_attention
        heads, hd = c.kv_heads, c.head_dim
        own_k = own_v = None
        if n_own:
            own_k = gather_cross(k_pool[li], table, longest, heads, hd)
            own_v = gather_cross(v_pool[li], table, longest, heads, hd)
        plans.append(CrossPlan(n_own, own_k, own_v, own_len, len(set(lengths)) > 1, constants[li], masks))
    return plans
