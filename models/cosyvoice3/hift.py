"""CosyVoice 3's vocoder (upstream CausalHiFTGenerator + CausalConvRNNF0Predictor): mel -> f0 (float64,
as upstream runs it) -> harmonic sine source -> causal HiFi-GAN/iSTFT decoder at 24 kHz (480 samples per
mel frame). Names follow hift.pt; its weight-normed convolutions (`.parametrizations.weight.original0/1`)
are folded into plain weights at load (models/codecs/hift/parts.py's `fold_weight_norm`), computed as
torch's parametrization does; what both CosyVoice vocoders share (Snake, the residual block, the decoder
body) is there too.

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

from ..codecs.hift.config import HiFTConfig
from ..codecs.hift.parts import ResBlock, SourceModule, decode_body, hann_window, source_stft

MARGIN = 40  # mel frames of left context a window decodes and discards (receptive field ~25 frames)


def causal_padding(kernel: int, dilation: int = 1) -> int:
    """Upstream CausalConv1d's padding (left for 'left' convolutions, right for 'right' ones)."""
    return int((kernel * dilation - dilation) / 2) * 2 + (kernel + 1) % 2


class LeftConv(nn.Conv1d):
    def __init__(self, cin: int, cout: int, kernel: int, dilation: int = 1) -> None:
        super().__init__(cin, cout, kernel, dilation=dilation)
        self.pad = causal_padding(kernel, dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(F.pad(x, (self.pad, 0)))


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
            self.source_resblocks.append(ResBlock(ch, k, d, LeftConv))
        self.resblocks = nn.ModuleList(
            ResBlock(base // 2 ** (i + 1), k, d, LeftConv)
            for i in range(len(self.ups))
            for k, d in zip(c.resblock_kernel_sizes, c.resblock_dilation_sizes, strict=True)
        )
        self.conv_post = LeftConv(base // 2 ** len(self.ups), c.n_fft + 2, 7)
        self.f0_predictor = F0Predictor(c)


class HiFT:
    def __init__(self, weights: HiFTWeights, sine_noise: torch.Tensor) -> None:
        self.w = weights
        self.c = weights.c
        self.sine_noise = sine_noise  # [samples, harmonics + 1], upstream's construction-time buffer
        self.dtype = sine_noise.dtype  # the vocoder part's dtype (spec.DTYPE_POLICY)
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
        x_in = mel[None]
        if look_right is None:
            x = w.conv_pre(F.pad(x_in, (0, c.conv_pre_look_right)))
        else:
            x = w.conv_pre(torch.cat([x_in, look_right[None]], 2))
        frames = x.shape[2] * (c.upsample // c.hop_len) + 1
        s_stft = source_stft(c, s[None], self.window_fn)[:, :, :frames]
        return decode_body(w, c, x, s_stft, self.window_fn)[0]
