"""The pieces of a HiFT vocoder that do not depend on whether its convolutions are centred (CosyVoice 2's
HiFTGenerator) or causal (CosyVoice 3's CausalHiFTGenerator): Snake, the residual block around a given
convolution, the source projection, weight-norm folding, the Hann window, and the decoder body from the
upsampling stack to the iSTFT. Names follow upstream's hift.pt."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .config import HiFTConfig

# (channels in, channels out, kernel, dilation) -> a convolution that keeps the length
ConvFactory = Callable[[int, int, int, int], nn.Module]


class Snake(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.alpha.unsqueeze(0).unsqueeze(-1)
        return x + (1.0 / (a + 0.000000001)) * pow(torch.sin(x * a), 2)


class ResBlock(nn.Module):
    """Upstream's ResBlock: per dilation, Snake -> conv (dilated) -> Snake -> conv, added to its input."""

    def __init__(self, ch: int, kernel: int, dilations: tuple[int, ...], conv: ConvFactory) -> None:
        super().__init__()
        self.convs1 = nn.ModuleList(conv(ch, ch, kernel, d) for d in dilations)
        self.convs2 = nn.ModuleList(conv(ch, ch, kernel, 1) for _ in dilations)
        self.activations1 = nn.ModuleList(Snake(ch) for _ in dilations)
        self.activations2 = nn.ModuleList(Snake(ch) for _ in dilations)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        layers = zip(self.convs1, self.convs2, self.activations1, self.activations2, strict=True)
        for c1, c2, a1, a2 in layers:
            x = c2(a2(c1(a1(x)))) + x
        return x


class SourceModule(nn.Module):
    """SourceModuleHnNSF's learned merge of the harmonics (the signal itself is each family's own)."""

    def __init__(self, harmonics: int) -> None:
        super().__init__()
        self.l_linear = nn.Linear(harmonics + 1, 1)


WEIGHT_NORM_G = ".parametrizations.weight.original0"
WEIGHT_NORM_V = ".parametrizations.weight.original1"


def fold_weight_norm(
    sd: dict[str, torch.Tensor], dtype: torch.dtype, prefix_dtypes: Mapping[str, torch.dtype] | None = None
) -> dict[str, torch.Tensor]:
    """`X.parametrizations.weight.original0/1` -> `X.weight` = torch._weight_norm(v, g, 0), the value
    torch's parametrization gives when the module runs in `dtype` (or, under a prefix of `prefix_dtypes`,
    in that prefix's dtype: float64 for modules upstream runs in float64): computed in that dtype, as the
    parametrization recomputes it on every call."""
    out: dict[str, torch.Tensor] = {}
    for k, v in sd.items():
        if k.endswith(WEIGHT_NORM_V):
            continue
        if k.endswith(WEIGHT_NORM_G):
            base = k[: -len(WEIGHT_NORM_G)]
            vv = sd.get(base + WEIGHT_NORM_V)
            if vv is None:
                out[k] = v  # reported as unexpected by the key check
                continue
            dt = next((d for p, d in (prefix_dtypes or {}).items() if base.startswith(p)), dtype)
            g, vv = v.to(dt), vv.to(dt)
            out[base + ".weight"] = torch._weight_norm(vv, g, 0)
        else:
            out[k] = v
    return out


def hann_window(n: int) -> torch.Tensor:
    """scipy.signal.get_window('hann', n, fftbins=True), computed the way scipy does, as float32."""
    fac = np.linspace(-np.pi, np.pi, n + 1)
    return torch.from_numpy((0.5 + 0.5 * np.cos(fac))[:-1].astype(np.float32))


def source_stft(c: HiFTConfig, source: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
    """The source signal [B, N] as the decoder reads it: real and imaginary STFT bins stacked, [B, n_fft
    + 2, frames]."""
    spec = torch.view_as_real(
        torch.stft(source, c.n_fft, c.hop_len, c.n_fft, window=window, return_complex=True)
    )
    return torch.cat([spec[..., 0], spec[..., 1]], dim=1)


def decode_body(
    w: nn.Module, c: HiFTConfig, x: torch.Tensor, s_stft: torch.Tensor, window: torch.Tensor
) -> torch.Tensor:
    """conv_pre's output x [B, C, T] and the source's STFT -> samples [B, N]: the upsampling stack with
    the source added at each level, the averaged residual blocks, conv_post and the iSTFT of its
    magnitude/phase (upstream's HiFTGenerator.decode after conv_pre, before the clamp)."""
    n_k = len(c.resblock_kernel_sizes)
    for i, up in enumerate(w.ups):
        x = up(F.leaky_relu(x, c.lrelu_slope))
        if i == len(w.ups) - 1:
            x = F.pad(x, (1, 0), mode="reflect")
        x = x + w.source_resblocks[i](w.source_downs[i](s_stft))
        xs = w.resblocks[i * n_k](x)
        for j in range(1, n_k):
            xs += w.resblocks[i * n_k + j](x)
        x = xs / n_k
    x = w.conv_post(F.leaky_relu(x))
    half = c.n_fft // 2 + 1
    mag = torch.clip(torch.exp(x[:, :half]), max=1e2)
    ph = torch.sin(x[:, half:])
    spec_out = torch.complex(mag * torch.cos(ph), mag * torch.sin(ph))
    return torch.istft(spec_out, c.n_fft, c.hop_len, c.n_fft, window=window)
