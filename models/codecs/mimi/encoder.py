"""Mimi's encode path (24 kHz waveform -> 12.5 Hz codes [T, n]), transformers `MimiModel.encode`.

SEANet conv encoder (causal convs, ELU, strided downsampling 4*5*6*8 = 960) -> causal transformer at
25 Hz (LayerNorm, LayerScale, GELU MLP, RoPE) -> stride-2 conv with replicate padding -> split RVQ
encode (semantic quantizer and acoustic RVQ both see the same embedding) -> the first n quantizers,
ceil(n_samples / 1920) frames. Attention: transformers 5.x masks keys older than `sliding_window`
(`window`); the 4.57 encoder Qwen3-TTS's reference runs builds a plain causal mask (`window=None`).
Parameter names are transformers' `MimiModel` ones (`encoder.*`, `encoder_transformer.*`,
`downsample.*`, `quantizer.*`); a checkpoint's own names reach them through a layout (layouts.py).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ...base import InputError
from ..rope import apply_rope, rope_cos_sin
from .config import MimiConfig

SAMPLE_RATE = 24000


class MimiConv(nn.Module):
    """Causal Conv1d with Mimi's padding: (k_eff - stride) on the left and just enough on the right
    for a whole number of strides, both in `pad_mode`."""

    def __init__(
        self,
        cin: int,
        cout: int,
        kernel: int,
        stride: int = 1,
        dilation: int = 1,
        bias: bool = True,
        pad_mode: str = "constant",
    ) -> None:
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, kernel, stride, dilation=dilation, bias=bias)
        self.k_eff = (kernel - 1) * dilation + 1
        self.stride = stride
        self.pad_left = self.k_eff - stride
        self.pad_mode = pad_mode

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-1]
        frames = math.ceil((n - self.k_eff + self.pad_left) / self.stride + 1) - 1
        extra = frames * self.stride + self.k_eff - self.pad_left - n
        mode = "constant" if self.pad_mode == "constant" else self.pad_mode
        return self.conv(F.pad(x, (self.pad_left, extra), mode=mode))


class ResnetBlock(nn.Module):
    def __init__(self, cfg: MimiConfig, dim: int, dilation: int) -> None:
        super().__init__()
        hidden = dim // cfg.compress
        self.block = nn.ModuleList(
            [
                nn.ELU(),
                MimiConv(dim, hidden, cfg.residual_kernel_size, dilation=dilation, pad_mode=cfg.pad_mode),
                nn.ELU(),
                MimiConv(hidden, dim, 1, pad_mode=cfg.pad_mode),
            ]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x
        for m in self.block:
            h = m(h)
        return x + h


class SEANetEncoder(nn.Module):
    def __init__(self, cfg: MimiConfig) -> None:
        super().__init__()
        pm = cfg.pad_mode
        layers: list[nn.Module] = [
            MimiConv(cfg.audio_channels, cfg.num_filters, cfg.kernel_size, pad_mode=pm)
        ]
        scale = 1
        for ratio in reversed(cfg.upsampling_ratios):
            dim = scale * cfg.num_filters
            layers += [
                ResnetBlock(cfg, dim, cfg.dilation_growth_rate**j) for j in range(cfg.num_residual_layers)
            ]
            layers += [nn.ELU(), MimiConv(dim, dim * 2, 2 * ratio, stride=ratio, pad_mode=pm)]
            scale *= 2
        layers += [
            nn.ELU(),
            MimiConv(scale * cfg.num_filters, cfg.hidden_size, cfg.last_kernel_size, pad_mode=pm),
        ]
        self.layers = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for m in self.layers:
            x = m(x)
        return x


class _Scale(nn.Module):
    def __init__(self, dim: int, init: float) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.full((dim,), init))


class _Attention(nn.Module):
    def __init__(self, cfg: MimiConfig) -> None:
        super().__init__()
        h, b = cfg.hidden_size, cfg.attention_bias
        self.q_proj = nn.Linear(h, cfg.num_heads * cfg.head_dim, bias=b)
        self.k_proj = nn.Linear(h, cfg.num_kv_heads * cfg.head_dim, bias=b)
        self.v_proj = nn.Linear(h, cfg.num_kv_heads * cfg.head_dim, bias=b)
        self.o_proj = nn.Linear(cfg.num_heads * cfg.head_dim, h, bias=b)


class _MLP(nn.Module):
    def __init__(self, cfg: MimiConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.fc2 = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)


class _Layer(nn.Module):
    def __init__(self, cfg: MimiConfig) -> None:
        super().__init__()
        self.self_attn = _Attention(cfg)
        self.mlp = _MLP(cfg)
        self.input_layernorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.norm_eps)
        self.post_attention_layernorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.norm_eps)
        self.self_attn_layer_scale = _Scale(cfg.hidden_size, cfg.layer_scale_initial_scale)
        self.mlp_layer_scale = _Scale(cfg.hidden_size, cfg.layer_scale_initial_scale)


class EncoderTransformer(nn.Module):
    def __init__(self, cfg: MimiConfig, window: int | None) -> None:
        super().__init__()
        self.cfg = cfg
        self.window = window  # None: full causal attention
        self.layers = nn.ModuleList([_Layer(cfg) for _ in range(cfg.num_layers)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, T, hidden] from position 0; query i sees keys i - window < j <= i."""
        c = self.cfg
        b, t, _ = x.shape
        cos, sin = rope_cos_sin(
            torch.arange(t, device=x.device).expand(b, t), c.head_dim, c.rope_theta, x.dtype
        )
        groups = c.num_heads // c.num_kv_heads
        mask = None
        if self.window is not None and t > self.window:
            diff = torch.arange(t, device=x.device)[:, None] - torch.arange(t, device=x.device)[None, :]
            mask = (diff >= 0) & (diff < self.window)
        for layer in self.layers:
            a = layer.self_attn
            h = layer.input_layernorm(x)
            q = apply_rope(a.q_proj(h).view(b, t, -1, c.head_dim).transpose(1, 2), cos, sin)
            k = apply_rope(a.k_proj(h).view(b, t, -1, c.head_dim).transpose(1, 2), cos, sin)
            v = a.v_proj(h).view(b, t, -1, c.head_dim).transpose(1, 2)
            if groups > 1:
                k, v = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None and t > 1)
            x = x + layer.self_attn_layer_scale.scale * a.o_proj(o.transpose(1, 2).reshape(b, t, -1))
            h = layer.mlp.fc2(F.gelu(layer.mlp.fc1(layer.post_attention_layernorm(x))))
            x = x + layer.mlp_layer_scale.scale * h
        return x


class EuclideanCodebook(nn.Module):
    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self.register_buffer("initialized", torch.ones(1))
        self.register_buffer("cluster_usage", torch.ones(size))
        self.register_buffer("embed_sum", torch.zeros(size, dim))

    def embed(self) -> torch.Tensor:
        return self.embed_sum / self.cluster_usage.clamp(min=1e-5)[:, None]

    def nearest(self, x: torch.Tensor, embed: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x [N, D] -> (index of the nearest centroid, distance gap to the second nearest)."""
        d = torch.cdist(x[None].float(), embed[None].float(), p=2)[0]
        two = d.topk(2, dim=-1, largest=False).values
        return d.argmin(dim=-1), two[:, 1] - two[:, 0]


class _VQ(nn.Module):
    def __init__(self, size: int, dim: int) -> None:
        super().__init__()
        self.codebook = EuclideanCodebook(size, dim)


class ResidualVQEncoder(nn.Module):
    def __init__(self, cfg: MimiConfig, n: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList([_VQ(cfg.codebook_size, cfg.codebook_dim) for _ in range(n)])
        self.input_proj: nn.Module | None = None
        self.output_proj: nn.Module | None = None
        if cfg.vq_hidden_dim != cfg.hidden_size:
            self.input_proj = nn.Conv1d(cfg.hidden_size, cfg.vq_hidden_dim, 1, bias=False)
            self.output_proj = nn.Conv1d(cfg.vq_hidden_dim, cfg.hidden_size, 1, bias=False)

    def encode(self, emb: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """emb [B, hidden, T] -> codes [n, B, T] and nearest/second-nearest gaps [n, B, T]."""
        residual = self.input_proj(emb) if self.input_proj is not None else emb
        b, _, t = residual.shape
        codes, gaps = [], []
        for layer in self.layers[:n]:
            embed = layer.codebook.embed()
            flat = residual.permute(0, 2, 1).reshape(-1, residual.shape[1])
            idx, gap = layer.codebook.nearest(flat, embed)
            idx = idx.view(b, t)
            residual = residual - F.embedding(idx, embed).permute(0, 2, 1)
            codes.append(idx)
            gaps.append(gap.view(b, t))
        return torch.stack(codes), torch.stack(gaps)

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, n, T] -> [B, hidden, T]: the codebooks' centroids summed in order, then output_proj."""
        out = None
        for i in range(codes.shape[1]):
            q = F.embedding(codes[:, i], self.layers[i].codebook.embed()).transpose(1, 2)
            out = q if out is None else out + q
        assert out is not None
        return self.output_proj(out) if self.output_proj is not None else out


class SplitRVQEncoder(nn.Module):
    def __init__(self, cfg: MimiConfig) -> None:
        super().__init__()
        self.n_semantic = cfg.num_semantic_quantizers
        self.semantic_residual_vector_quantizer = ResidualVQEncoder(cfg, cfg.num_semantic_quantizers)
        self.acoustic_residual_vector_quantizer = ResidualVQEncoder(
            cfg, cfg.num_quantizers - cfg.num_semantic_quantizers
        )

    def encode(self, emb: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        c1, g1 = self.semantic_residual_vector_quantizer.encode(emb, self.n_semantic)
        c2, g2 = self.acoustic_residual_vector_quantizer.encode(emb, n - self.n_semantic)
        return torch.cat([c1, c2]), torch.cat([g1, g2])

    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [B, n, T] -> [B, hidden, T] (semantic part + acoustic part, as transformers sums them)."""
        s = self.n_semantic
        out = self.semantic_residual_vector_quantizer.decode(codes[:, :s])
        if codes.shape[1] > s:
            out = out + self.acoustic_residual_vector_quantizer.decode(codes[:, s:])
        return out


class MimiEncoder(nn.Module):
    """The encode half of `MimiModel` under its names: encoder, encoder_transformer, downsample, quantizer."""

    def __init__(self, cfg: MimiConfig, window: int | None) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = SEANetEncoder(cfg)
        self.encoder_transformer = EncoderTransformer(cfg, window)
        self.downsample = MimiConv(
            cfg.hidden_size,
            cfg.hidden_size,
            2 * cfg.latent_stride,
            stride=cfg.latent_stride,
            bias=False,
            pad_mode="replicate",
        )
        self.quantizer = SplitRVQEncoder(cfg)

    @property
    def downsample_rate(self) -> int:
        return self.cfg.samples_per_frame

    @torch.inference_mode()
    def encode_with_gaps(
        self, wav: np.ndarray, sample_rate: int, n_quantizers: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Codes [T, n_quantizers] int64 and, per code, the distance gap between the nearest and
        second-nearest centroid (small gaps are where float noise may flip a code)."""
        x = check_reference_audio(wav, sample_rate, self.cfg.sampling_rate)
        p = next(self.parameters())
        h = torch.from_numpy(x).to(device=p.device, dtype=p.dtype)[None, None]
        h = self.encoder(h)
        h = self.encoder_transformer(h.transpose(1, 2)).transpose(1, 2)
        h = self.downsample(h)
        codes, gaps = self.quantizer.encode(h, n_quantizers)
        frames = -(-x.shape[0] // self.downsample_rate)
        return (
            codes[:, 0, :frames].T.cpu().numpy().astype(np.int64),
            gaps[:, 0, :frames].T.float().cpu().numpy(),
        )


def check_reference_audio(wav: np.ndarray, sample_rate: int, expected_rate: int = SAMPLE_RATE) -> np.ndarray:
    """Validate a reference clip; return it as a 1-D float32 array. Raises InputError."""
    if sample_rate != expected_rate:
        raise InputError(
            f"the reference audio is sampled at {sample_rate} Hz but this model needs "
            f"{expected_rate} Hz: resample it to {expected_rate} Hz first"
        )
    x = np.asarray(wav, dtype=np.float32)
    if x.ndim == 2 and 1 in x.shape:
        x = x.reshape(-1)
    if x.ndim != 1:
        raise InputError(f"the reference audio must be mono (1-D samples), got an array of shape {x.shape}")
    if x.size == 0:
        raise InputError("the reference audio is empty: give a clip of a few seconds of speech")
    if not np.isfinite(x).all():
        raise InputError("the reference audio contains NaN or infinite samples")
    return x
