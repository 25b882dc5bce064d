"""Building blocks of the Qwen3-TTS 12 Hz codec decoder that are its own (the streaming causal
convolutions under them are shared: models/codecs/streaming_conv.py), each with a full-sequence `forward`
and an exact streaming `stream`.

Parameter names follow the official `Qwen3TTSTokenizerV2Decoder` so its `decoder.*` tensors load
directly.
"""

from __future__ import annotations

import torch
from torch import nn

from ..codecs.streaming_conv import CausalConv, CausalTransConv, State


class SnakeBeta(nn.Module):
    """x + 1/exp(beta) * sin^2(x * exp(alpha)); alpha/beta stored as logs (official op order)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        alpha = torch.exp(self.alpha[None, :, None])
        beta = torch.exp(self.beta[None, :, None])
        return x + (1.0 / (beta + 1e-9)) * torch.pow(torch.sin(x * alpha), 2)


class ConvNeXtBlock(nn.Module):
    """Causal depthwise conv k=7, LayerNorm, 4x GELU MLP, per-channel gamma, residual."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dwconv = CausalConv(dim, dim, 7, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.ones(dim))

    def _mlp(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        h = self.pwconv2(self.act(self.pwconv1(self.norm(h.permute(0, 2, 1)))))
        return x + (self.gamma * h).permute(0, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._mlp(x, self.dwconv(x))

    def stream(self, x: torch.Tensor, lengths: torch.Tensor, st: State, new: State) -> torch.Tensor:
        return self._mlp(x, self.dwconv.stream(x, lengths, st, new))


class ResidualUnit(nn.Module):
    def __init__(self, dim: int, dilation: int) -> None:
        super().__init__()
        self.act1 = SnakeBeta(dim)
        self.conv1 = CausalConv(dim, dim, 7, dilation=dilation)
        self.act2 = SnakeBeta(dim)
        self.conv2 = CausalConv(dim, dim, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(self.act2(self.conv1(self.act1(x))))

    def stream(self, x: torch.Tensor, lengths: torch.Tensor, st: State, new: State) -> torch.Tensor:
        return x + self.conv2(self.act2(self.conv1.stream(self.act1(x), lengths, st, new)))


class DecoderBlock(nn.Module):
    """SnakeBeta, ConvTranspose(2r, r) trimmed by r, then residual units with dilations 1, 3, 9.
    `block` is a ModuleList so the official keys `block.0.alpha`, `block.1.conv.weight`... match."""

    def __init__(self, cin: int, cout: int, rate: int) -> None:
        super().__init__()
        self.rate = rate
        self.block = nn.ModuleList(
            [SnakeBeta(cin), CausalTransConv(cin, cout, 2 * rate, rate)]
            + [ResidualUnit(cout, d) for d in (1, 3, 9)]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for m in self.block:
            x = m(x)
        return x

    def stream(self, x: torch.Tensor, lengths: torch.Tensor, st: State, new: State) -> torch.Tensor:
        x = self.block[1].stream(self.block[0](x), lengths, st, new)
        lengths = lengths * self.rate
        for m in self.block[2:]:
            x = m.stream(x, lengths, st, new)
        return x
