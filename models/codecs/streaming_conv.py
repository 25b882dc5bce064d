"""The streaming causal convolutions of the codec decoders (Qwen3-TTS's 12 Hz tokenizer, Mimi): each has a
full-sequence `forward` and an exact streaming `stream` that carries history between chunks.

Streaming convention: a batch holds chunks of different lengths, RIGHT-padded to the longest;
`lengths[b]` is row b's number of valid time steps at the module's rate. Every op is causal, so padding
on the right never leaks into valid outputs; the only place lengths matter is when a module keeps its
last inputs as history for the next chunk (`take_window` picks them per row). The parameter names
(`conv.weight`, `conv.bias`) are the official ones, so a decoder's tensors load directly.
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
    """Conv1d with (k-1)*dilation zeros on the left (stride 1 in every decoder that uses it, so the
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
