"""Building blocks of the Qwen3-TTS 12 Hz codec decoder, each with a full-sequence `forward` and an
exact streaming `stream` that carries history between chunks.

Parameter names follow the official `Qwen3TTSTokenizerV2Decoder` so its `decoder.*` tensors load
directly. Streaming convention: a batch holds chunks of different lengths, RIGHT-padded to the longest;
`lengths[b]` is row b's number of valid time steps at the module's rate. Every op is causal, so padding
on the right never leaks into valid outputs; the only place lengths matter is when a module keeps its
last inputs as history for the next chunk (`take_window` picks them per row).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

State = dict[str, torch.Tensor]


def take_window(x: torch.Tensor, start: torch.Tensor, size: int) -> torch.Tensor:
    """x[b, ..., start[b] : start[b] + size] along the last dim, per row (start: int64 [B])."""
    idx = start.view(-1, *([1] * (x.dim() - 1))) + torch.arange(size, device=x.device)
    return torch.gather(x, x.dim() - 1, idx.expand(*x.shape[:-1], size))


class CausalConv(nn.Module):
    """Conv1d with (k-1)*dilation zeros on the left (stride 1 everywhere in this decoder, so the
    official 'extra padding' term is always 0). Streaming state: the last (k-1)*dilation inputs."""

    def __init__(self, cin: int, cout: int, kernel: int, dilation: int = 1, groups: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, kernel, dilation=dilation, groups=groups)
        self.history = (kernel - 1) * dilation
        self.state_key = ""  # set by the owning decoder (its module path)

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        return {self.state_key: (self.conv.in_channels, self.history)} if self.history else {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pad(x, (self.history, 0)))

    def stream(self, x: torch.Tensor, lengths: torch.Tensor, st: State, new: State) -> torch.Tensor:
        if not self.history:
            return self.conv(x)
        xc = torch.cat([st[self.state_key], x], dim=-1)
        new[self.state_key] = take_window(xc, lengths, self.history)
        return self.conv(xc)


class CausalTransConv(nn.Module):
    """ConvTranspose1d(k, stride s) with the last k-s outputs trimmed (official CausalTransConvNet).

    Output block i (s samples) depends on inputs i, i-1, ..., i-ceil(k/s)+1, so streaming keeps the
    last ceil(k/s)-1 input frames, re-runs them in front of the chunk and drops their output: exact,
    and no overlap-add bookkeeping. A fresh slot holds zeros, which contribute nothing (the bias is
    added once per output sample either way)."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int) -> None:
        super().__init__()
        self.conv = nn.ConvTranspose1d(cin, cout, kernel, stride=stride)
        self.stride = stride
        self.trim = kernel - stride
        self.history = -(-kernel // stride) - 1
        self.state_key = ""

    def state_shapes(self) -> dict[str, tuple[int, ...]]:
        return {self.state_key: (self.conv.in_channels, self.history)} if self.history else {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return y[..., : y.shape[-1] - self.trim] if self.trim else y

    def stream(self, x: torch.Tensor, lengths: torch.Tensor, st: State, new: State) -> torch.Tensor:
        if not self.history:
            return self.forward(x)
        xc = torch.cat([st[self.state_key], x], dim=-1)
        new[self.state_key] = take_window(xc, lengths, self.history)
        y = self.conv(xc)
        skip = self.history * self.stride
        return y[..., skip : skip + x.shape[-1] * self.stride]


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
