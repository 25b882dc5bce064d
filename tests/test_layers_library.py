"""The LM layer library (models/layers): the one paged-attention forward agrees with plain causal attention
over each row's own keys, whatever pages the rows hold; the interleaved rotary rotates each pair by its
angle; families take their layers from the library, not from each other."""

from __future__ import annotations

import math
import re
from pathlib import Path

import torch
import torch.nn.functional as F
from voxcli.models.layers import (
    Attention,
    DenseCache,
    PagedBatch,
    Rope,
    Rotary,
    apply_rope_interleaved,
    paged_attention,
)

MODELS = Path(__file__).resolve().parents[1] / "models"


class _Row:
    def __init__(self, request_id: str, pages: list[int]) -> None:
        self.request_id, self.pages = request_id, pages


def test_paged_attention_matches_dense_causal_attention_per_row():
    g = torch.Generator().manual_seed(0)
    heads, kv_heads, hd, ps = 4, 2, 8, 4
    # two rows: one prefilling 6 positions from 0, one decoding position 9 after 9 cached ones, on
    # interleaved, out-of-order pages of one pool
    rows = [_Row("a", [5, 1]), _Row("b", [0, 6, 3])]
    starts, counts = [0, 9], [6, 1]
    pb = PagedBatch.for_rows(rows, starts, counts, ps, torch.device("cpu"))
    k_pool = torch.zeros(8, ps, kv_heads, hd)
    v_pool = torch.zeros(8, ps, kv_heads, hd)
    full_k = [torch.randn(s + n, kv_heads, hd, generator=g) for s, n in zip(starts, counts, strict=True)]
    full_v = [torch.randn(s + n, kv_heads, hd, generator=g) for s, n in zip(starts, counts, strict=True)]
    # row b's first 9 positions are already in its pages
    for p in range(9):
        page, off = rows[1].pages[p // ps], p % ps
        k_pool[page, off], v_pool[page, off] = full_k[1][p], full_v[1][p]
    T = max(counts)
    q = torch.randn(2, T, heads, hd, generator=g)
    k = torch.zeros(2, T, kv_heads, hd)
    v = torch.zeros(2, T, kv_heads, hd)
    for b, (s, n) in enumerate(zip(starts, counts, strict=True)):
        k[b, :n], v[b, :n] = full_k[b][s:], full_v[b][s:]
    out = paged_attention(q, k, v, k_pool, v_pool, pb, pb.mask())
    for b, (s, n) in enumerate(zip(starts, counts, strict=True)):
        qb = q[b, :n].transpose(0, 1)[None]  # [1, H, n, hd]
        kb = full_k[b].repeat_interleave(heads // kv_heads, dim=1).transpose(0, 1)[None]
        vb = full_v[b].repeat_interleave(heads // kv_heads, dim=1).transpose(0, 1)[None]
        visible = torch.arange(s + n)[None, :] <= torch.arange(s, s + n)[:, None]
        want = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=visible)
        torch.testing.assert_close(out[b, :n], want[0].transpose(0, 1).reshape(n, -1))
    # the step's K/V landed in the rows' slots
    torch.testing.assert_close(k_pool[rows[1].pages[9 // ps], 9 % ps], full_k[1][9])
    torch.testing.assert_close(v_pool[rows[0].pages[1], 1], full_v[0][5])


def test_dense_cache_continues_the_causal_pass():
    torch.manual_seed(0)
    attn = Attention(16, 4, 2, 4, qk_norm=True)
    rotary = Rotary(4, Rope(theta=10000.0))
    x = torch.randn(2, 5, 16)
    cos, sin = rotary(torch.arange(5), x.dtype)
    whole = attn.forward_dense(x, cos, sin, DenseCache(1), 0)
    cache = DenseCache(1)
    rest = [attn.forward_dense(x[:, :3], cos[:3], sin[:3], cache, 0)]
    for t in (3, 4):
        assert cache.length == t
        rest.append(attn.forward_dense(x[:, t:t + 1], cos[t:t + 1], sin[t:t + 1], cache, 0))
    torch.testing.assert_close(torch.cat(rest, dim=1), whole)


def test_interleaved_rope_rotates_each_pair_by_its_angle():
    x = torch.randn(3, 2, 8)  # [T, heads, hd]
    angle = torch.rand(3, 1, 4) * 2 * math.pi
    out = apply_rope_interleaved(x, angle.cos(), angle.sin())
    as_complex = torch.view_as_complex(x.unflatten(-1, (-1, 2)).contiguous())
    want = torch.view_as_real(as_complex * torch.polar(torch.ones_like(angle), angle)).flatten(-2)
    torch.testing.assert_close(out, want)


def test_llama3_scaling_keeps_high_frequencies_and_slows_low_ones():
    plain = Rotary(64, Rope(theta=500000.0)).inv_freq
    scaled = Rotary(64, Rope("llama3", 500000.0, 32.0, 1.0, 4.0, 8192)).inv_freq
    assert torch.equal(scaled[:4], plain[:4])  # wavelengths under original/high_freq_factor
    torch.testing.assert_close(scaled[-4:], plain[-4:] / 32.0)  # wavelengths over original/low_freq_factor


def test_the_paged_attention_forward_is_defined_once_and_no_family_borrows_layers():
    defs = [p for p in MODELS.rglob("*.py") if "def forward_paged" in p.read_text()]
    assert [p.relative_to(MODELS).as_posix() for p in defs] == ["layers/attention.py"]
    borrowed = re.compile(r"from \.\.(qwen3_tts|higgs_audio|dia|cosyvoice3)\.(layers|config|lm) import .*"
                          r"(Attention|DecoderLayer|PagedBatch|Rotary|Rope|SwiGLU|BlockConfig|Qwen2Model|apply_rope)")
    found = [f"{p.relative_to(MODELS)}: {m.group(0)}" for p in MODELS.rglob("*.py")
             for m in borrowed.finditer(p.read_text())]
    assert not found, found
