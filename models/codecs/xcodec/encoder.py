"""The encoder parts of the X-Codec design, which the Higgs audio tokenizer (24 kHz, transformers
`HiggsAudioV2TokenizerModel`) and X-Codec itself (16 kHz, SpeechLM's audio input) share: the acoustic
encoder (DAC's encoder: conv, strided blocks, Snake, conv) and the semantic encoder over HuBERT's
averaged hidden states (a conv, then blocks of ELU residual units and a strided conv), with their sizes
(`HiggsEncoderConfig`, read from the Higgs tokenizer's config.json; X-Codec builds one from its own).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ...base import CheckpointError
from ...checkpoint import read_json
from ..dac.layers import Conv, EncoderBlock, Snake1d
from .hubert import HubertConfig


@dataclass(frozen=True)
class HiggsEncoderConfig:
    sample_rate: int
    semantic_sample_rate: int
    downsampling_ratios: tuple[int, ...]
    encoder_hidden_size: int
    acoustic_hidden: int
    semantic: HubertConfig
    kernel_size: int
    channel_ratios: tuple[float, ...]
    strides: tuple[int, ...]
    block_dilations: tuple[int, ...]
    unit_kernel_size: int
    codebook_size: int
    codebook_dim: int
    bandwidth: float  # the top target bandwidth (kbps): encode's default
    downsample_factor: int

    @property
    def hop_length(self) -> int:
        return math.prod(self.downsampling_ratios)

    @property
    def hidden_size(self) -> int:
        return self.acoustic_hidden + self.semantic.hidden_size

    @property
    def semantic_downsample(self) -> int:
        return int(self.hop_length / (self.sample_rate / self.semantic_sample_rate) / self.downsample_factor)

    @property
    def n_quantizers(self) -> int:
        """The quantizers encode uses at the top bandwidth (log2(codebook_size) bits per code per frame)."""
        per_q = math.log2(self.codebook_size) * math.ceil(self.sample_rate / self.hop_length) / 1000
        return int(max(1, math.floor(self.bandwidth / per_q)))

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str, sample_rate: int, semantic_sample_rate: int,
                  codebook_dim: int | None, bandwidth: float, downsample_factor: int | None
                  ) -> HiggsEncoderConfig:
        """The sizes both configs write alike, from config.json `d`; the arguments are what the two
        read differently (a codebook_dim or downsample_factor of None: the design's own, the fc width
        and the hop). TypeError / ValueError / IndexError for a value of the wrong kind."""
        ac = d.get("acoustic_model_config") or {}
        semantic = HubertConfig.from_dict(d.get("semantic_model_config") or {}, where)
        acoustic = int(ac.get("hidden_size", 256))
        ratios = tuple(int(x) for x in ac.get("downsampling_ratios", [8, 5, 4, 2]))
        return cls(
            sample_rate=sample_rate,
            semantic_sample_rate=semantic_sample_rate,
            downsampling_ratios=ratios,
            encoder_hidden_size=int(ac.get("encoder_hidden_size", 64)),
            acoustic_hidden=acoustic,
            semantic=semantic,
            kernel_size=int(d.get("kernel_size", 3)),
            channel_ratios=tuple(float(x) for x in d.get("channel_ratios", [1, 1])),
            strides=tuple(int(x) for x in d.get("strides", [1, 1])),
            block_dilations=tuple(int(x) for x in d.get("block_dilations", [1, 1])),
            unit_kernel_size=int(d.get("unit_kernel_size", 3)),
            codebook_size=int(d.get("codebook_size", 1024)),
            codebook_dim=acoustic + semantic.hidden_size if codebook_dim is None else int(codebook_dim),
            bandwidth=bandwidth,
            downsample_factor=math.prod(ratios) if downsample_factor is None else downsample_factor,
        )

    @classmethod
    def read(cls, path: Path) -> HiggsEncoderConfig:
        """The Higgs audio tokenizer's config.json (24 kHz; HuBERT at 16 kHz)."""
        d = read_json(path)
        try:
            cfg = cls.from_dict(
                d, str(path),
                sample_rate=int(d.get("sample_rate", 24000)),
                semantic_sample_rate=int(d.get("semantic_sample_rate", 16000)),
                codebook_dim=d.get("codebook_dim", 64),
                bandwidth=float(list(d.get("target_bandwidths", [0.5, 1, 1.5, 2, 4]))[-1]),
                downsample_factor=int(d.get("downsample_factor", 320)),
            )
        except (TypeError, ValueError, IndexError) as e:
            raise CheckpointError(f"{path}: invalid audio tokenizer setting ({e})") from None
        if len(cfg.strides) != len(cfg.channel_ratios):
            raise CheckpointError(f"{path}: strides and channel_ratios must be equally long")
        return cfg


class AcousticEncoder(nn.Module):
    """DAC's encoder: conv1 (1 -> enc, k7), blocks doubling the width at each stride, Snake, conv2 (k3) to
    the acoustic latent."""

    def __init__(self, cfg: HiggsEncoderConfig) -> None:
        super().__init__()
        enc, n = cfg.encoder_hidden_size, len(cfg.downsampling_ratios)
        self.conv1 = Conv(1, enc, 7)
        self.block = nn.ModuleList(EncoderBlock(enc * 2**i, s) for i, s in enumerate(cfg.downsampling_ratios))
        self.snake1 = Snake1d(enc * 2**n)
        self.conv2 = Conv(enc * 2**n, cfg.acoustic_hidden, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv1(x)
        for blk in self.block:
            x = blk(x)
        return self.conv2(self.snake1(x))

    def output_length(self, n: int) -> int:
        """Frames for n samples, by the reference's per-conv arithmetic (its `int(.)` truncation included)."""
        for m in self.modules():
            if isinstance(m, Conv):
                n = int((n + 2 * m.padding - m.dilation * (m.kernel - 1) - 1) / m.stride + 1)
        return n


class SemanticUnit(nn.Module):
    def __init__(self, channels: int, kernel: int, dilation: int) -> None:
        super().__init__()
        pad = ((kernel - 1) // 2) * dilation
        self.conv1 = nn.Conv1d(channels, channels, kernel, padding=pad, dilation=dilation, bias=False)
        self.conv2 = nn.Conv1d(channels, channels, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(F.elu(self.conv1(F.elu(x))))


class SemanticBlock(nn.Module):
    def __init__(self, cfg: HiggsEncoderConfig, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.res_units = nn.ModuleList(
            SemanticUnit(cin, cfg.unit_kernel_size, d) for d in cfg.block_dilations
        )
        kernel = 3 if stride == 1 else 2 * stride
        self.conv = nn.Conv1d(cin, cout, kernel, stride=stride, padding=(kernel - 1) // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for unit in self.res_units:
            x = unit(x)
        return self.conv(x)


class SemanticEncoder(nn.Module):
    def __init__(self, cfg: HiggsEncoderConfig) -> None:
        super().__init__()
        h, k = cfg.semantic.hidden_size, cfg.kernel_size
        self.conv = nn.Conv1d(h, h, k, padding=k // 2, bias=False)
        blocks, cin = [], h
        for ratio, stride in zip(cfg.channel_ratios, cfg.strides, strict=True):
            cout = int(h * ratio)
            blocks.append(SemanticBlock(cfg, cin, cout, stride))
            cin = cout
        self.conv_blocks = nn.ModuleList(blocks)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        for blk in self.conv_blocks:
            x = blk(x)
        return x
