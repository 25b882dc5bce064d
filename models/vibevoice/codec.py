"""VibeVoice's acoustic decoder and semantic encoder: causal conv stacks that stream one frame at a time.

Both are `VibeVoiceAcousticTokenizer` halves (module names as in the checkpoint): a stem conv and
ConvNeXt-style blocks (RMS norm, depthwise causal conv, GELU MLP, layer scales), then one strided stage
per ratio (a transposed conv upsampling in the decoder, a strided conv downsampling in the encoder), then
a head conv. Every conv is causal: streaming it means remembering its last `left_pad` input columns.

Streaming state (`Stream`): one tensor [B, C, left_pad] per conv, zeros at a request's start (what
transformers' lazily-initialised padding cache holds), the batch stacked on dim 0. A step reads the state,
computes, and returns the next state as a new object, so a caller that fails part-way keeps the old one.
The transposed conv follows transformers' streaming rule: it convolves the cached inputs with the new ones,
drops `kernel - stride` samples at the right and keeps the newest `T * stride`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ..layers import RMSNorm
from .config import CodecConfig

Stream = list[torch.Tensor]  # per conv (in module order): [B, C, left_pad]


class CausalConv(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, kernel, stride, groups=groups)
        self.left_pad = kernel - stride
        self.index = -1  # position in the Stream, set by the owning stack

    def forward(self, x: torch.Tensor, state: Stream, out: Stream) -> torch.Tensor:
        full = torch.cat([state[self.index].to(x.dtype), x], dim=-1)
        out[self.index] = full[:, :, full.shape[-1] - self.left_pad:]
        return self.conv(full)


class CausalConvTranspose(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, stride: int) -> None:
        super().__init__()
        self.convtr = nn.ConvTranspose1d(cin, cout, kernel, stride)
        self.stride, self.trim = stride, kernel - stride
        self.left_pad = kernel - 1
        self.index = -1

    def forward(self, x: torch.Tensor, state: Stream, out: Stream) -> torch.Tensor:
        n = x.shape[-1]
        full = torch.cat([state[self.index].to(x.dtype), x], dim=-1)
        out[self.index] = full[:, :, full.shape[-1] - self.left_pad:]
        y = self.convtr(full)
        if self.trim > 0:
            y = y[..., : -self.trim]
        return y[:, :, -n * self.stride:]


class Block(nn.Module):
    def __init__(self, c: CodecConfig, dim: int) -> None:
        super().__init__()
        self.norm = RMSNorm(dim, c.rms_norm_eps)
        self.ffn_norm = RMSNorm(dim, c.rms_norm_eps)
        self.ffn = nn.Module()
        self.ffn.linear1 = nn.Linear(dim, c.ffn_expansion * dim)
        self.ffn.linear2 = nn.Linear(c.ffn_expansion * dim, dim)
        self.gamma = nn.Parameter(torch.ones(dim))
        self.ffn_gamma = nn.Parameter(torch.ones(dim))
        self.mixer = CausalConv(dim, dim, c.kernel_size, groups=dim)

    def forward(self, x: torch.Tensor, state: Stream, out: Stream) -> torch.Tensor:
        h = self.norm(x.transpose(1, 2)).transpose(1, 2)
        x = x + self.mixer(h, state, out) * self.gamma.unsqueeze(-1)
        h = self.ffn.linear2(F.gelu(self.ffn.linear1(self.ffn_norm(x.transpose(1, 2)))))
        return x + h.transpose(1, 2) * self.ffn_gamma.unsqueeze(-1)


class Stage(nn.Module):
    """A conv (`conv` or `convtr`, by the checkpoint's name) followed by its blocks."""

    def __init__(self, c: CodecConfig, resample: nn.Module, dim: int, depth: int, name: str) -> None:
        super().__init__()
        setattr(self, name, resample)
        self._resample = name
        self.stage = nn.ModuleList(Block(c, dim) for _ in range(depth))

    def forward(self, x: torch.Tensor, state: Stream, out: Stream) -> torch.Tensor:
        x = getattr(self, self._resample)(x, state, out)
        for b in self.stage:
            x = b(x, state, out)
        return x


class _Stack(nn.Module):
    def _number(self) -> None:
        convs = [m for m in self.modules() if isinstance(m, CausalConv | CausalConvTranspose)]
        for i, m in enumerate(convs):
            m.index = i
        self._shapes = [(m.conv.in_channels if isinstance(m, CausalConv) else m.convtr.in_channels,
                         m.left_pad)
                        for m in convs]

    def zero_state(self, batch: int, dtype: torch.dtype, device: torch.device) -> Stream:
        return [torch.zeros(batch, c, p, dtype=dtype, device=device) for c, p in self._shapes]

    def state_bytes(self, dtype: torch.dtype) -> int:
        return sum(c * p for c, p in self._shapes) * torch.empty((), dtype=dtype).element_size()

    def run(self, x: torch.Tensor, state: Stream) -> tuple[torch.Tensor, Stream]:
        out: Stream = [s for s in state]
        x = self.stem(x, state, out)
        for layer in self.conv_layers:
            x = layer(x, state, out)
        return self.head(x, state, out), out


class Decoder(_Stack):
    """latent [B, D, T] -> audio [B, channels, T * hop]."""

    def __init__(self, c: CodecConfig) -> None:
        super().__init__()
        n = len(c.depths)
        depths = list(reversed(c.depths))  # transformers' decoder_config reverses the encoder's depths
        top = c.num_filters * 2 ** (n - 1)
        self.stem = Stage(c, CausalConv(c.hidden_size, top, c.kernel_size), top, depths[0], "conv")
        ups = list(reversed(c.ratios))
        layers = []
        for i, r in enumerate(ups):
            cin, cout = c.num_filters * 2 ** (n - 1 - i), c.num_filters * 2 ** (n - 2 - i)
            layers.append(Stage(c, CausalConvTranspose(cin, cout, 2 * r, r), cout, depths[i + 1], "convtr"))
        self.conv_layers = nn.ModuleList(layers)
        self.head = CausalConv(c.num_filters, c.channels, c.kernel_size)
        self._number()


class Encoder(_Stack):
    """audio [B, channels, T * hop] -> latent [B, D, T]."""

    def __init__(self, c: CodecConfig) -> None:
        super().__init__()
        f = c.num_filters
        self.stem = Stage(c, CausalConv(c.channels, f, c.kernel_size), f, c.depths[0], "conv")
        layers = []
        for i, r in enumerate(c.ratios):
            cin, cout = f * 2**i, f * 2 ** (i + 1)
            layers.append(Stage(c, CausalConv(cin, cout, 2 * r, r), cout, c.depths[i + 1], "conv"))
        self.conv_layers = nn.ModuleList(layers)
        self.head = CausalConv(f * 2 ** len(c.ratios), c.hidden_size, c.kernel_size)
        self._number()
