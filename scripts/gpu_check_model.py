"""Real-size stand-ins of the Qwen3-TTS 1.7B per-step stages, random bf16 weights, for gpu_check timing.

Not the model program (that is `models/qwen3_tts/`): these are the same shapes and kernel mix with
fixed output lengths, so gpu_check can time a decode step and a codec chunk per batch bucket on each
SM partition without a checkpoint. Dimensions from the design notes (qwen3-tts-notes.md):

- decode step: talker 28 x [GQA 16/8 heads x 128, qk-norm, SwiGLU 6144] at width 2048 with paged-KV
  attention (voxcli.models.paged_attention), codec head 2048->3072, then the depth transformer: 15 sequential
  sub-steps of 5 layers at width 1024 (16/8 x 128, SwiGLU 3072) with one 1024->2048 head per group;
- codec chunk: 16 codebooks -> 512, transformer 8 x [16 x 64 heads, MLP 1024] at width 512 between
  1024-wide projections, two x2 transposed-conv upsamplers with ConvNeXt blocks, a conv decoder
  1024->1536 and 4 blocks (rates 8, 5, 4, 3; widths 768, 384, 192, 96) of 3 dilated residual units each,
  so one frame becomes 1920 samples. Each chunk is `left_context + frames` frames long.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from voxcli.models.paged_attention import make_decode_attention


@dataclass(frozen=True)
class Dims:
    hidden: int = 2048
    layers: int = 28
    heads: int = 16
    kv: int = 8
    head_dim: int = 128
    inter: int = 6144
    vocab: int = 3072
    p_hidden: int = 1024
    p_layers: int = 5
    p_inter: int = 3072
    p_vocab: int = 2048
    groups: int = 16  # codebooks per frame
    c_dim: int = 512
    c_latent: int = 1024
    c_layers: int = 8
    c_heads: int = 16
    c_inter: int = 1024
    c_decoder: int = 1536
    c_rates: tuple[int, ...] = (8, 5, 4, 3)


REAL_1P7B = Dims()
SMALL = Dims(
    hidden=64,
    layers=2,
    heads=4,
    kv=2,
    head_dim=16,
    inter=128,
    vocab=96,
    p_hidden=32,
    p_layers=2,
    p_inter=64,
    p_vocab=64,
    c_dim=32,
    c_latent=48,
    c_layers=2,
    c_heads=4,
    c_inter=64,
    c_decoder=64,
)


class Block(nn.Module):
    """Pre-norm decoder layer; attention is supplied by the caller (paged or dense)."""

    def __init__(self, width: int, heads: int, kv: int, head_dim: int, inter: int) -> None:
        super().__init__()
        self.heads, self.kv, self.hd = heads, kv, head_dim
        self.n1, self.n2 = nn.RMSNorm(width, eps=1e-6), nn.RMSNorm(width, eps=1e-6)
        self.qn, self.kn = nn.RMSNorm(head_dim, eps=1e-6), nn.RMSNorm(head_dim, eps=1e-6)
        self.qkv = nn.Linear(width, (heads + 2 * kv) * head_dim, bias=False)
        self.o = nn.Linear(heads * head_dim, width, bias=False)
        self.gate_up = nn.Linear(width, 2 * inter, bias=False)
        self.down = nn.Linear(inter, width, bias=False)

    def qkv_heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        q, k, v = self.qkv(self.n1(x)).split([self.heads * self.hd, self.kv * self.hd, self.kv * self.hd], -1)
        shape = x.shape[:-1]
        return (
            self.qn(q.view(*shape, self.heads, self.hd)),
            self.kn(k.view(*shape, self.kv, self.hd)),
            v.view(*shape, self.kv, self.hd),
        )

    def finish(self, x: torch.Tensor, attn: torch.Tensor) -> torch.Tensor:
        x = x + self.o(attn.flatten(-2))
        g, u = self.gate_up(self.n2(x)).chunk(2, -1)
        return x + self.down(F.silu(g) * u)


class DecodeStepModel(nn.Module):
    """One talker step + the 15 depth sub-steps for a fixed batch; weights shared by all buckets."""

    def __init__(self, d: Dims) -> None:
        super().__init__()
        self.d = d
        self.talker = nn.ModuleList(
            Block(d.hidden, d.heads, d.kv, d.head_dim, d.inter) for _ in range(d.layers)
        )
        self.norm = nn.RMSNorm(d.hidden, eps=1e-6)
        self.head = nn.Linear(d.hidden, d.vocab, bias=False)
        self.emb0 = nn.Embedding(d.vocab, d.hidden)
        self.proj = nn.Linear(d.hidden, d.p_hidden)
        self.pred = nn.ModuleList(
            Block(d.p_hidden, d.heads, d.kv, d.head_dim, d.p_inter) for _ in range(d.p_layers)
        )
        self.p_norm = nn.RMSNorm(d.p_hidden, eps=1e-6)
        self.p_heads = nn.Parameter(torch.randn(d.groups - 1, d.p_vocab, d.p_hidden) * 0.02)
        self.p_emb = nn.Parameter(torch.randn(d.groups - 1, d.p_vocab, d.p_hidden) * 0.02)

    def step(self, x: torch.Tensor, kv: torch.Tensor, attn) -> torch.Tensor:  # noqa: ANN001
        """x [b, H] input embeddings; kv [layers, pages, 2, page, Hkv, D]; returns codes [b, groups]."""
        h = x
        for i, layer in enumerate(self.talker):
            q, k, v = layer.qkv_heads(h)
            attn.append(k, v, kv[i])
            h = layer.finish(h, attn.run(q, kv[i]))
        top = self.norm(h)
        c0 = self.head(top).argmax(-1)
        codes = [c0]
        # Depth transformer: sequence [proj(h), proj(emb0[c0]), e_1, ...]; dense causal attention over
        # at most groups+1 positions, recomputed per sub-step (its cache is tiny).
        seq = torch.stack([self.proj(top), self.proj(self.emb0(c0))], 1)  # [b, 2, P]
        for g in range(self.d.groups - 1):
            y = seq
            for layer in self.pred:
                q, k, v = layer.qkv_heads(y)
                a = F.scaled_dot_product_attention(
                    q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, enable_gqa=True
                ).transpose(1, 2)
                y = layer.finish(y, a)
            logits = self.p_norm(y[:, -1]) @ self.p_heads[g].t()
            c = logits.argmax(-1)
            codes.append(c)
            seq = torch.cat([seq, self.p_emb[g][c].unsqueeze(1)], 1)
        return torch.stack(codes, 1)

    def prefill(self, x: torch.Tensor) -> torch.Tensor:
        """x [1, T, H]: dense causal prompt pass (the engine runs prefill eagerly)."""
        h = x
        for layer in self.talker:
            q, k, v = layer.qkv_heads(h)
            a = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True, enable_gqa=True
            ).transpose(1, 2)
            h = layer.finish(h, a)
        return self.head(self.norm(h[:, -1]))


class ResUnit(nn.Module):
    def __init__(self, ch: int, dilation: int) -> None:
        super().__init__()
        self.conv = nn.Conv1d(ch, ch, 7, dilation=dilation, padding=3 * dilation)
        self.pw = nn.Conv1d(ch, ch, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.pw(F.silu(self.conv(F.silu(x))))


class CodecModel(nn.Module):
    """Chunk codes [b, T, groups] -> PCM [b, T * 1920]."""

    def __init__(self, d: Dims) -> None:
        super().__init__()
        self.books = nn.Parameter(torch.randn(d.groups, 2048, d.c_dim) * 0.1)
        self.pre = nn.Conv1d(d.c_dim, d.c_latent, 3, padding=1)
        self.inp, self.out = nn.Linear(d.c_latent, d.c_dim), nn.Linear(d.c_dim, d.c_latent)
        hd = d.c_dim // d.c_heads
        self.layers = nn.ModuleList(
            Block(d.c_dim, d.c_heads, d.c_heads, hd, d.c_inter) for _ in range(d.c_layers)
        )
        self.up = nn.ModuleList(nn.ConvTranspose1d(d.c_latent, d.c_latent, 2, stride=2) for _ in range(2))
        self.dw = nn.ModuleList(
            nn.Conv1d(d.c_latent, d.c_latent, 7, padding=3, groups=d.c_latent) for _ in range(2)
        )
        self.mlp = nn.ModuleList(
            nn.Sequential(
                nn.Linear(d.c_latent, 4 * d.c_latent), nn.GELU(), nn.Linear(4 * d.c_latent, d.c_latent)
            )
            for _ in range(2)
        )
        self.dec_in = nn.Conv1d(d.c_latent, d.c_decoder, 7, padding=3)
        blocks, ch = [], d.c_decoder
        for r in d.c_rates:
            out = ch // 2
            blocks.append(
                nn.ModuleList(
                    [
                        nn.ConvTranspose1d(ch, out, 2 * r, stride=r, padding=r // 2),
                        ResUnit(out, 1),
                        ResUnit(out, 3),
                        ResUnit(out, 9),
                    ]
                )
            )
            ch = out
        self.blocks = nn.ModuleList(blocks)
        self.dec_out = nn.Conv1d(ch, 1, 7, padding=3)
        self.samples_per_frame = 4 * int(torch.tensor(d.c_rates).prod())

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        b, t, g = codes.shape
        x = self.books[torch.arange(g, device=codes.device), codes].sum(2)  # [b, t, c_dim]
        x = self.inp(self.pre(x.transpose(1, 2)).transpose(1, 2))
        mask = torch.ones(t, t, dtype=torch.bool, device=codes.device).tril().triu(-71)  # window 72
        for layer in self.layers:
            q, k, v = layer.qkv_heads(x)
            a = F.scaled_dot_product_attention(
                q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask
            ).transpose(1, 2)
            x = layer.finish(x, a)
        x = self.out(x).transpose(1, 2)
        for up, dw, mlp in zip(self.up, self.dw, self.mlp, strict=True):
            x = up(x)
            y = F.layer_norm(dw(x).transpose(1, 2), (x.shape[1],))
            x = x + mlp(y).transpose(1, 2)
        x = self.dec_in(x)
        for up, *units in self.blocks:
            x = up(F.silu(x))
            for u in units:
                x = u(x)
        return torch.tanh(self.dec_out(F.silu(x))).squeeze(1)[:, : t * self.samples_per_frame]


class DecodeBench:
    """Static buffers + paged KV for one bucket: `run()` is graph-capturable after `plan()`."""

    def __init__(
        self,
        model: DecodeStepModel,
        bucket: int,
        context: int,
        page: int,
        device,
        dtype,  # noqa: ANN001
        backend: str = "auto",
    ) -> None:
        d = model.d
        pages_per_row = -(-(context + 1) // page)
        total_pages = bucket * pages_per_row + 1  # + 1 scratch page for padding rows
        self.model, self.bucket = model, bucket
        self.kv = torch.randn(d.layers, total_pages, 2, page, d.kv, d.head_dim, device=device, dtype=dtype)
        self.x = torch.randn(bucket, d.hidden, device=device, dtype=dtype)
        self.attn = make_decode_attention(
            bucket,
            backend=backend,
            num_qo_heads=d.heads,
            num_kv_heads=d.kv,
            head_dim=d.head_dim,
            page_size=page,
            max_pages_per_row=pages_per_row,
            scratch_page=total_pages - 1,
            device=device,
            dtype=dtype,
        )
        self.tables = [list(range(i * pages_per_row, (i + 1) * pages_per_row)) for i in range(bucket)]
        self.lens = [context + 1] * bucket

    def plan(self) -> None:
        self.attn.plan(self.tables, self.lens)

    def run(self) -> dict[str, torch.Tensor]:
        return {"codes": self.model.step(self.x, self.kv, self.attn)}
