"""Mimi's decode path (12.5 Hz codes -> 24 kHz waveform), transformers `MimiModel.decode`, with exact
streaming: split RVQ decode (centroids = embed_sum / cluster_usage) -> depthwise transposed conv to 25 Hz
(`upsample`) -> sliding-window decoder transformer -> SEANet decoder (causal convs, ELU, transposed convs
8, 6, 5, 4, residual blocks). 1920 samples per frame; no clamp (transformers returns the raw decoder output).

Every op is causal, so a request's chunks decoded in order with carried state equal one full forward; the
conv/transposed-conv streaming blocks are the shared ones (models/codecs/streaming_conv.py, same `.conv`
parameter names as transformers' MimiConv1d / MimiConvTranspose1d), the transformer's is transformer.py.
"""

from __future__ import annotations

import torch
from torch import nn

from ..streaming_conv import CausalConv, CausalTransConv, State
from .config import MimiConfig


class GroupedTransConv(CausalTransConv):
    """Mimi's `upsample`: a depthwise (groups = channels), bias-free causal transposed conv."""

    def __init__(self, channels: int, kernel: int, stride: int, groups: int) -> None:
        super().__init__(channels, channels, kernel, stride)
        self.conv = nn.ConvTranspose1d(channels, channels, kernel, stride=stride, groups=groups, bias=False)


class DecoderResnet(nn.Module):
    """ELU, conv k (dilation d) to dim/compress, ELU, conv 1 back, plus the input (no shortcut conv)."""

    def __init__(self, cfg: MimiConfig, dim: int, dilation: int) -> None:
        super().__init__()
        hidden = dim // cfg.compress
        self.block = nn.ModuleList(
            [
                nn.ELU(),
                CausalConv(dim, hidden, cfg.residual_kernel_size, dilation=dilation),
                nn.ELU(),
                CausalConv(hidden, dim, 1),
            ]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block[3](self.block[2](self.block[1](self.block[0](x))))

    def stream(self, x: torch.Tensor, lengths: torch.Tensor, st: State, new: State) -> torch.Tensor:
        return x + self.block[3](self.block[2](self.block[1].stream(self.block[0](x), lengths, st, new)))


class SEANetDecoder(nn.Module):
    """transformers' MimiDecoder `layers`: conv, then per ratio [ELU, transposed conv, resnet blocks],
    then ELU and the last conv (the same list indices, so `decoder.layers.N.*` names match)."""

    def __init__(self, cfg: MimiConfig) -> None:
        super().__init__()
        scale = 2 ** len(cfg.upsampling_ratios)
        layers: list[nn.Module] = [CausalConv(cfg.hidden_size, scale * cfg.num_filters, cfg.kernel_size)]
        for ratio in cfg.upsampling_ratios:
            dim = scale * cfg.num_filters
            layers += [nn.ELU(), CausalTransConv(dim, dim // 2, 2 * ratio, ratio)]
            layers += [
                DecoderResnet(cfg, dim // 2, cfg.dilation_growth_rate**j)
                for j in range(cfg.num_residual_layers)
            ]
            scale //= 2
        layers += [nn.ELU(), CausalConv(cfg.num_filters, cfg.audio_channels, cfg.last_kernel_size)]
        self.layers = nn.ModuleList(layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for m in self.layers:
            x = m(x)
        return x

    def stream(self, x: torch.Tensor, lengths: torch.Tensor, st: State, new: State) -> torch.Tensor:
        for m in self.layers:
            if isinstance(m, CausalTransConv):
                x = m.stream(x, lengths, st, new)
                lengths = lengths * m.stride
            elif isinstance(m, CausalConv | DecoderResnet):
                x = m.stream(x, lengths, st, new)
            else:
                x = m(x)
        return x
