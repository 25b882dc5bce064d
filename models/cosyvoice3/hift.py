"""CosyVoice 3's vocoder (upstream CausalHiFTGenerator + CausalConvRNNF0Predictor): mel -> f0 (float64,
as upstream runs it) -> harmonic sine source -> causal HiFi-GAN/iSTFT decoder at 24 kHz (480 samples per
mel frame). Names follow hift.pt; its weight-normed convolutions (`.parametrizations.weight.original0/1`)
are folded into plain weights at load (`fold_weight_norm`), computed as torch's parametrization does.

Everything is causal apart from a look-ahead (conv_pre: 4 frames, the f0 predictor: 3) and the iSTFT
overlap, so `HiFT.window` can decode the samples of a range of frames from a bounded window of mel before
them (`MARGIN` frames of warm-up that are thrown away): what an engine chunk costs does not grow with the
utterance. The source's phase is the one place with unbounded memory: a cumulative sum over every frame
so far, which the caller keeps per request (a few floats per frame) and passes in.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .config import HiFTConfig

MARGIN = 40  # mel frames of left context a window decodes and discards (receptive field ~25 frames)


def causal_padding(kernel: int, dilation: int = 1) -> int:
    """Upstream CausalConv1d's padding (left for 'left' convolutions, right for 'right' ones)."""
    return int((kernel * dilation - dilation) / 2) * 2 + (kernel + 1) % 2


# The vocoder runs in float32 whatever the LM and flow run in (upstream halves only those two; the
# source signal is float32 and the CPU has no bfloat16 istft). The loader and the codec apply it.
HIFT_DTYPE = torch.float32

class Snake(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.alpha.unsqueeze(0).unsqueeze(-1)
        return x + (1.0 / (a + 0.000000001)) * pow(torch.sin(x * a), 2)


class LeftConv(nn.Conv1d):
    def __init__(self, cin: int, cout: int, kernel: int, dilation: int = 1) -> None:
        super().__init__(cin, cout, kernel, dilation=dilation)
        self.pad = causal_padding(kernel, dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(F.pad(x, (self.pad, 0)))


class ResBlock(nn.Module):
    def __init__(self, ch: int, kernel: int, dilations: tuple[int, ...]) -> None:
        super().__init__()
        self.convs1 = nn.ModuleList(LeftConv(ch, ch, kernel, d) for d in dilations)
        self.convs2 = nn.ModuleList(LeftConv(ch, ch, kernel, 1) for _ in dilations)
        self.activations1 = nn.ModuleList(Snake(ch) for _ in dilations)
        self.activations2 = nn.ModuleList(Snake(ch) for _ in dilations)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for c1, c2, a1, a2 in zip(
            self.convs1, self.convs2, self.activations1, self.activations2, strict=True
        ):
            x = c2(a2(c1(a1(x)))) + x
        return x


class Upsample(nn.Conv1d):
    def __init__(self, cin: int, cout: int, kernel: int, stride: int) -> None:
        super().__init__(cin, cout, kernel)
        self.stride_up = stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.interpolate(x, scale_factor=float(self.stride_up), mode="nearest")
        return super().forward(F.pad(x, (self.kernel_size[0] - 1, 0)))


class DownSample(nn.Conv1d):
    def __init__(self, cin: int, cout: int, kernel: int, stride: int) -> None:
        super().__init__(cin, cout, kernel, stride=stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(F.pad(x, (self.stride[0] - 1, 0)))


class F0Predictor(nn.Module):
    def __init__(self, c: HiFTConfig) -> None:
        super().__init__()
        ch = c.f0_cond_channels
        self.condnet = nn.Sequential(
            nn.Conv1d(c.f0_in_channels, ch, 4),
            nn.ELU(),
            *[m for _ in range(4) for m in (LeftConv(ch, ch, 3), nn.ELU())],
        )
        self.classifier = nn.Linear(ch, c.f0_num_class)

    def forward(self, mel: torch.Tensor, lookahead: torch.Tensor | None) -> torch.Tensor:
        """mel [B, 80, T] (float64) and the 3 frames after it (None: zeros) -> f0 [B, T]."""
        pad = causal_padding(4)
        x = torch.cat([mel, lookahead], 2) if lookahead is not None else F.pad(mel, (0, pad))
        x = self.condnet[0](x)
        for m in self.condnet[1:]:
            x = m(x)
        return torch.abs(self.classifier(x.transpose(1, 2)).squeeze(-1))


class SourceModule(nn.Module):
    def __init__(self, harmonics: int) -> None:
        super().__init__()
        self.l_linear = nn.Linear(harmonics + 1, 1)


class HiFTWeights(nn.Module):
    """The state dict of hift.pt (weight norm folded)."""

    def __init__(self, c: HiFTConfig) -> None:
        super().__init__()
        self.c = c
        base = c.base_channels
        self.m_source = SourceModule(c.nb_harmonics)
        self.conv_pre = nn.Conv1d(c.in_channels, base, c.conv_pre_look_right + 1)
        self.ups = nn.ModuleList(
            Upsample(base // 2**i, base // 2 ** (i + 1), k, u)
            for i, (u, k) in enumerate(zip(c.upsample_rates, c.upsample_kernel_sizes, strict=True))
        )
        downs = np.cumprod([1, *c.upsample_rates[::-1][:-1]])[::-1]
        self.source_downs = nn.ModuleList()
        self.source_resblocks = nn.ModuleList()
        for i, (u, k, d) in enumerate(
            zip(downs, c.source_resblock_kernel_sizes, c.source_resblock_dilation_sizes, strict=True)
        ):
            ch = base // 2 ** (i + 1)
            self.source_downs.append(
                LeftConv(c.n_fft + 2, ch, 1) if u == 1 else DownSample(c.n_fft + 2, ch, int(u) * 2, int(u))
            )
            self.source_resblocks.append(ResBlock(ch, k, d))
        self.resblocks = nn.ModuleList(
            ResBlock(base // 2 ** (i + 1), k, d)
            for i in range(len(self.ups))
            for k, d in zip(c.resblock_kernel_sizes, c.resblock_dilation_sizes, strict=True)
        )
        self.conv_post = LeftConv(base // 2 ** len(self.ups), c.n_fft + 2, 7)
        self.f0_predictor = F0Predictor(c)


WEIGHT_NORM_G = ".parametrizations.weight.original0"
WEIGHT_NORM_V = ".parametrizations.weight.original1"


def fold_weight_norm(
    sd: dict[str, torch.Tensor], dtype: torch.dtype, float64_prefixes: tuple[str, ...] = ()
) -> dict[str, torch.Tensor]:
    """`X.parametrizations.weight.original0/1` -> `X.weight` = torch._weight_norm(v, g, 0), the value
    torch's parametrization gives when the module runs in `dtype` (float64 for modules upstream runs in
    float64): computed in that dtype, as the parametrization recomputes it on every call."""
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
            dt = torch.float64 if base.startswith(float64_prefixes) else dtype
            g, vv = v.to(dt), vv.to(dt)
            out[base + ".weight"] = torch._weight_norm(vv, g, 0)
        else:
            out[k] = v
    return out


def hann_window(n: int) -> torch.Tensor:
    """scipy.signal.get_window('hann', n, fftbins=True), computed the way scipy does, as float32."""
    fac = np.linspace(-np.pi, np.pi, n + 1)
    return torch.from_numpy((0.5 + 0.5 * np.cos(fac))[:-1].astype(np.float32))


class HiFT:
    def __init__(self, weights: HiFTWeights, sine_noise: torch.Tensor) -> None:
        self.w = weights
        self.c = weights.c
        self.sine_noise = sine_noise  # [samples, harmonics + 1], upstream's construction-time buffer
        self.dtype = HIFT_DTYPE
        self.window_fn = hann_window(self.c.n_fft).to(sine_noise.device)

    # --- f0 and the sine source -----------------------------------------------------------------
    def f0(self, mel: torch.Tensor, lookahead: torch.Tensor | None) -> torch.Tensor:
        """f0 [T] (float32) of mel [80, T] with the 3 frames after it (None: the end)."""
        la = None if lookahead is None else lookahead.double()[None]
        return self.w.f0_predictor(mel.double()[None], la)[0].to(mel.dtype)

    def rad(self, f0: torch.Tensor) -> torch.Tensor:
        """Per-frame phase increments [T, harmonics+1] (upstream computes them per sample; every sample
        of a frame has the same value, and its linear /480 resampling reads two equal samples)."""
        h = torch.arange(1, self.c.nb_harmonics + 2, dtype=torch.float32, device=f0.device)
        return (f0[:, None] * h[None] / self.c.sampling_rate) % 1

    def source(self, f0: torch.Tensor, phase: torch.Tensor, first_frame: int) -> torch.Tensor:
        """The merged source signal [samples] of frames first_frame.. (f0 [T], phase [T, H] = the
        cumulative sum of `rad` over the whole utterance up to each frame)."""
        up = self.c.upsample
        ph = phase * 2 * math.pi * up
        sines = torch.sin(ph).repeat_interleave(up, dim=0) * self.c.nsf_alpha
        uv = (f0 > self.c.nsf_voiced_threshold).float().repeat_interleave(up)[:, None]
        noise_amp = uv * self.c.nsf_sigma + (1 - uv) * self.c.nsf_alpha / 3
        start = first_frame * up
        buf = self.sine_noise[start : start + sines.shape[0]]
        if buf.shape[0] < sines.shape[0]:
            raise ValueError(f"utterance longer than the vocoder's {self.sine_noise.shape[0] // up} frames")
        s = sines * uv + noise_amp * buf
        return torch.tanh(self.w.m_source.l_linear(s))[:, 0]

    # --- decoder ----------------------------------------------------------------------------------
    def decode(self, mel: torch.Tensor, look_right: torch.Tensor | None, s: torch.Tensor) -> torch.Tensor:
        """Samples of mel [80, T] (look_right: the 4 frames after it, None at the end) from the source
        s [T' samples] covering at least those T frames."""
        c, w = self.c, self.w
        spec = torch.view_as_real(
            torch.stft(s[None], c.n_fft, c.hop_len, c.n_fft, window=self.window_fn, return_complex=True)
        )
        x_in = mel[None]
        if look_right is None:
            x = w.conv_pre(F.pad(x_in, (0, c.conv_pre_look_right)))
        else:
            x = w.conv_pre(torch.cat([x_in, look_right[None]], 2))
        frames = x.shape[2] * (c.upsample // c.hop_len) + 1
        s_stft = torch.cat([spec[..., 0], spec[..., 1]], dim=1)[:, :, :frames]
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
        return torch.istft(spec_out, c.n_fft, c.hop_len, c.n_fft, window=self.window_fn)[0]
