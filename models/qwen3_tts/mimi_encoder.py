"""Mimi encoder (24 kHz waveform -> 12.5 Hz codes [T, 16]) for voice-clone ICL reference codes.

This is the encode path of transformers' `MimiModel` as the official `Qwen3TTSTokenizerV2Model.encode`
uses it: SEANet conv encoder (causal convs, ELU, strided downsampling 4*5*6*8 = 960) -> causal
transformer at 25 Hz (LayerNorm, LayerScale, GELU MLP, RoPE; full causal attention: the reference
builds a plain causal mask, its `sliding_window` is not applied) -> stride-2 conv with replicate
padding -> split RVQ encode (semantic quantizer and acoustic RVQ both see the same embedding) -> the
first 16 quantizers, ceil(n_samples / 1920) frames. Parameter names are the official `encoder.*` keys
of speech_tokenizer/model.safetensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..base import InputError
from ..config_fields import get_float, get_int, rope_theta
from .codec import read_tokenizer_config, speech_tokenizer_dir
from .codec_transformer import apply_rope, rope_cos_sin
from .weights_check import load_checked

SAMPLE_RATE = 24000


@dataclass(frozen=True)
class MimiEncoderConfig:
    """Fields of speech_tokenizer/config.json `encoder_config` (a transformers MimiConfig)."""

    sampling_rate: int = 24000
    frame_rate: float = 12.5
    audio_channels: int = 1
    hidden_size: int = 512
    num_filters: int = 64
    num_residual_layers: int = 1
    upsampling_ratios: tuple[int, ...] = (8, 6, 5, 4)
    kernel_size: int = 7
    last_kernel_size: int = 3
    residual_kernel_size: int = 3
    dilation_growth_rate: int = 2
    compress: int = 2
    codebook_size: int = 2048
    codebook_dim: int = 256
    num_quantizers: int = 32
    num_semantic_quantizers: int = 1
    vq_hidden_dim: int = 256
    num_layers: int = 8
    intermediate_size: int = 2048
    num_heads: int = 8
    num_kv_heads: int = 8
    head_dim: int = 64
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    attention_bias: bool = False
    layer_scale_initial_scale: float = 0.01
    pad_mode: str = "constant"

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "speech_tokenizer/config.json encoder_config"
                  ) -> MimiEncoderConfig:
        """As transformers 4.5x or 5.x writes a MimiConfig (5.x: `rope_parameters`, no `rope_theta`);
        absent or null -> MimiConfig's default, a wrong kind -> CheckpointError naming key and file."""
        if not d.get("use_causal_conv", True) or d.get("use_conv_shortcut", False):
            raise ValueError("only the causal, shortcut-free Mimi encoder (as in Qwen3-TTS) is supported")

        def i(key: str, default: int) -> int:
            return get_int(d, key, default, where)

        hidden, heads = i("hidden_size", 512), i("num_attention_heads", 8)
        ratios = d.get("upsampling_ratios") or (8, 6, 5, 4)
        return cls(
            sampling_rate=i("sampling_rate", 24000),
            frame_rate=get_float(d, "frame_rate", get_float(d, "_frame_rate", 12.5, where), where),
            audio_channels=i("audio_channels", 1),
            hidden_size=hidden,
            num_filters=i("num_filters", 64),
            num_residual_layers=i("num_residual_layers", 1),
            upsampling_ratios=tuple(get_int({"upsampling_ratios": r}, "upsampling_ratios", None, where)
                                    for r in ratios),
            kernel_size=i("kernel_size", 7),
            last_kernel_size=i("last_kernel_size", 3),
            residual_kernel_size=i("residual_kernel_size", 3),
            dilation_growth_rate=i("dilation_growth_rate", 2),
            compress=i("compress", 2),
            codebook_size=i("codebook_size", 2048),
            codebook_dim=i("codebook_dim", 256),
            num_quantizers=i("num_quantizers", 32),
            num_semantic_quantizers=i("num_semantic_quantizers", 1),
            vq_hidden_dim=i("vector_quantization_hidden_dimension", 256),
            num_layers=i("num_hidden_layers", 8),
            intermediate_size=i("intermediate_size", 2048),
            num_heads=heads,
            num_kv_heads=i("num_key_value_heads", heads),
            head_dim=i("head_dim", hidden // heads),
            rope_theta=rope_theta(d, 10000.0, where),
            norm_eps=get_float(d, "norm_eps", 1e-5, where),
            attention_bias=bool(d.get("attention_bias") or False),
            layer_scale_initial_scale=get_float(d, "layer_scale_initial_scale", 0.01, where),
            pad_mode=str(d.get("pad_mode") or "constant"),
        )

    @property
    def encodec_frame_rate(self) -> int:
        return math.ceil(self.sampling_rate / math.prod(self.upsampling_ratios))


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
    def __init__(self, cfg: MimiEncoderConfig, dim: int, dilation: int) -> None:
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
    def __init__(self, cfg: MimiEncoderConfig) -> None:
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
    def __init__(self, cfg: MimiEncoderConfig) -> None:
        super().__init__()
        h, b = cfg.hidden_size, cfg.attention_bias
        self.q_proj = nn.Linear(h, cfg.num_heads * cfg.head_dim, bias=b)
        self.k_proj = nn.Linear(h, cfg.num_kv_heads * cfg.head_dim, bias=b)
        self.v_proj = nn.Linear(h, cfg.num_kv_heads * cfg.head_dim, bias=b)
        self.o_proj = nn.Linear(cfg.num_heads * cfg.head_dim, h, bias=b)


class _MLP(nn.Module):
    def __init__(self, cfg: MimiEncoderConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.fc2 = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)


class _Layer(nn.Module):
    def __init__(self, cfg: MimiEncoderConfig) -> None:
        super().__init__()
        self.self_attn = _Attention(cfg)
        self.mlp = _MLP(cfg)
        self.input_layernorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.norm_eps)
        self.post_attention_layernorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.norm_eps)
        self.self_attn_layer_scale = _Scale(cfg.hidden_size, cfg.layer_scale_initial_scale)
        self.mlp_layer_scale = _Scale(cfg.hidden_size, cfg.layer_scale_initial_scale)


class EncoderTransformer(nn.Module):
    def __init__(self, cfg: MimiEncoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.layers = nn.ModuleList([_Layer(cfg) for _ in range(cfg.num_layers)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [B, T, hidden], full causal attention from position 0."""
        c = self.cfg
        b, t, _ = x.shape
        cos, sin = rope_cos_sin(
            torch.arange(t, device=x.device).expand(b, t), c.head_dim, c.rope_theta, x.dtype
        )
        groups = c.num_heads // c.num_kv_heads
        for layer in self.layers:
            a = layer.self_attn
            h = layer.input_layernorm(x)
            q = apply_rope(a.q_proj(h).view(b, t, -1, c.head_dim).transpose(1, 2), cos, sin)
            k = apply_rope(a.k_proj(h).view(b, t, -1, c.head_dim).transpose(1, 2), cos, sin)
            v = a.v_proj(h).view(b, t, -1, c.head_dim).transpose(1, 2)
            if groups > 1:
                k, v = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
            o = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
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
    def __init__(self, cfg: MimiEncoderConfig, n: int) -> None:
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


class SplitRVQEncoder(nn.Module):
    def __init__(self, cfg: MimiEncoderConfig) -> None:
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


class MimiEncoderModel(nn.Module):
    """Holds the official `encoder.*` submodules: encoder, encoder_transformer, downsample, quantizer."""

    def __init__(
        self, cfg: MimiEncoderConfig, valid_quantizers: int = 16, downsample_rate: int = 1920
    ) -> None:
        super().__init__()
        self.cfg = cfg
        self.valid_quantizers = valid_quantizers
        self.downsample_rate = downsample_rate
        self.encoder = SEANetEncoder(cfg)
        self.encoder_transformer = EncoderTransformer(cfg)
        stride = cfg.encodec_frame_rate / cfg.frame_rate
        self.downsample = MimiConv(
            cfg.hidden_size, cfg.hidden_size, 2 * int(stride), stride=2, bias=False, pad_mode="replicate"
        )
        self.quantizer = SplitRVQEncoder(cfg)

    @classmethod
    def from_checkpoint(
        cls, path: str | Path, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32
    ) -> MimiEncoderModel:
        st_dir = speech_tokenizer_dir(path)
        full = read_tokenizer_config(st_dir)
        cfg = MimiEncoderConfig.from_dict(full.get("encoder_config") or {},
                                          f"{st_dir / 'config.json'} encoder_config")
        with torch.device("meta"):
            model = cls(
                cfg, full.get("encoder_valid_num_quantizers", 16), full.get("encode_downsample_rate", 1920)
            )
        load_checked(model, st_dir / "model.safetensors", prefix="encoder.", device=device, dtype=dtype)
        return model.eval()

    @torch.inference_mode()
    def encode_with_gaps(
        self, wav: np.ndarray, sample_rate: int = SAMPLE_RATE
    ) -> tuple[np.ndarray, np.ndarray]:
        """Codes [T, 16] int64 and, per code, the distance gap between the nearest and second-nearest
        centroid (small gaps are where float noise may flip a code)."""
        x = check_reference_audio(wav, sample_rate, self.cfg.sampling_rate)
        p = next(self.parameters())
        h = torch.from_numpy(x).to(device=p.device, dtype=p.dtype)[None, None]
        h = self.encoder(h)
        h = self.encoder_transformer(h.transpose(1, 2)).transpose(1, 2)
        h = self.downsample(h)
        codes, gaps = self.quantizer.encode(h, self.valid_quantizers)
        frames = -(-x.shape[0] // self.downsample_rate)
        return (
            codes[:, 0, :frames].T.cpu().numpy().astype(np.int64),
            gaps[:, 0, :frames].T.float().cpu().numpy(),
        )

    def encode(self, wav: np.ndarray, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
        """Reference waveform (mono float32 at 24 kHz) -> codes [ceil(n / 1920), 16] int64."""
        return self.encode_with_gaps(wav, sample_rate)[0]


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


@lru_cache(maxsize=4)
def _cached_encoder(path: str, device: str, dtype: torch.dtype) -> MimiEncoderModel:
    return MimiEncoderModel.from_checkpoint(path, device=device, dtype=dtype)


def encode(
    checkpoint: str | Path,
    wav: np.ndarray,
    sample_rate: int = SAMPLE_RATE,
    device: str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> np.ndarray:
    """Reference codes [T, 16] for `wav` with the speech tokenizer of `checkpoint` (loaded once)."""
    return _cached_encoder(str(Path(checkpoint).resolve()), str(device), dtype).encode(wav, sample_rate)
