"""One decode step of Kyutai TTS for a batch of rows (each at its own position): the main transformer on
the paged KV pool (one position per row), the text head, then -- after the machine turned the sampled
text token into the token fed back -- the depformer's 32 codebooks, all rows together."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..layers import DenseCache, PagedBatch, apply_rope_moshi, paged_attention
from .layers import KyutaiLM


def main_step(
    lm: KyutaiLM,
    tokens: torch.Tensor,
    cond_sum: torch.Tensor,
    cross: list[list[tuple[torch.Tensor, torch.Tensor]]],
    pb: PagedBatch,
    k_pool: torch.Tensor,
    v_pool: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """tokens [B, 1 + n_q] (text, audio; -1 = zero) at each row's position pb.q_pos[:, 0] ->
    (out_norm'd hidden [B, dim], text logits [B, text_card] float32)."""
    c = lm.cfg
    x = lm.text_emb(tokens[:, 0])
    for q in range(c.n_q):
        x = x + lm.emb[q](tokens[:, q + 1])
    x = (x + cond_sum.to(x.dtype))[:, None]  # [B, 1, dim]
    B = x.shape[0]
    H, D = c.num_heads, c.dim // c.num_heads
    pos = pb.q_pos  # [B, 1]
    n_keys = pb.block_table.shape[1] * pb.page_size
    j = torch.arange(n_keys, device=x.device)
    delta = pos[:, :, None] - j[None, None, :]
    mask = ((delta >= 0) & (delta < c.context) & (j[None, None, :] < pb.kv_len[:, None, None]))[:, None]
    cross_k = [torch.stack([row[i][0] for row in cross]) for i in range(c.num_layers)]
    cross_v = [torch.stack([row[i][1] for row in cross]) for i in range(c.num_layers)]
    for i, layer in enumerate(lm.transformer.layers):
        h = layer.norm1(x)
        qkv = layer.self_attn.in_projs[0](h).view(B, 1, 3, H, D).permute(2, 0, 3, 1, 4)
        q = apply_rope_moshi(qkv[0], pos, c.max_period)
        k = apply_rope_moshi(qkv[1], pos, c.max_period)
        # the library's paged attention takes [B, T, heads, hd]: moshi's layout is [B, heads, T, hd]
        v = qkv[2]
        a = paged_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), k_pool[i], v_pool[i], pb,
                            mask)
        x = x + layer.self_attn.out_projs[0](a)
        h = layer.norm_cross(x)
        wq = layer.cross_attention.in_projs[0].weight[: c.dim]
        cq = F.linear(h, wq).view(B, 1, H, D).transpose(1, 2)
        a = F.scaled_dot_product_attention(cq, cross_k[i].to(cq.dtype), cross_v[i].to(cq.dtype))
        x = x + layer.cross_attention.out_projs[0](a.transpose(1, 2).reshape(B, 1, -1))
        x = x + layer.gating(layer.norm2(x))
    x = lm.out_norm(x)[:, 0]
    return x, lm.text_linear(x).float()


def depformer_frame(lm: KyutaiLM, hidden: torch.Tensor, text: torch.Tensor, pick) -> torch.Tensor:
    """hidden [B, dim] (out_norm'd), text [B] (the token fed back, muxed) -> codes [B, n_q]; `pick(q,
    logits [B, card] float32)` chooses each codebook's token (greedy / per-row sampling)."""
    c = lm.cfg
    B = hidden.shape[0]
    H, D = c.dep_heads, c.dep_dim // c.dep_heads
    cache = DenseCache(len(lm.depformer.layers), time_dim=2)  # moshi's [B, heads, T, hd], this frame only
    prev = text
    out = []
    for q in range(c.n_q):
        s = c.schedule[q]
        emb = lm.depformer_text_emb(prev) if q == 0 else lm.depformer_emb[q - 1](prev)
        x = (lm.depformer_in[s](hidden) + emb)[:, None]
        for i, layer in enumerate(lm.depformer.layers):
            h = layer.norm1(x)
            qkv = layer.self_attn.in_projs[s](h).view(B, 1, 3, H, D).permute(2, 0, 3, 1, 4)
            k, v = cache.extend(i, qkv[1], qkv[2])
            a = F.scaled_dot_product_attention(qkv[0], k, v)
            x = x + layer.self_attn.out_projs[s](a.transpose(1, 2).reshape(B, 1, -1))
            x = x + layer.gating[s](layer.norm2(x))
        token = pick(q, lm.linears[q](x[:, 0]).float())
        out.append(token)
        prev = token
    return torch.stack(out, dim=1)
