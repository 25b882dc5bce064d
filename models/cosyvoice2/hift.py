"""CosyVoice 2's vocoder (upstream HiFTGenerator + ConvRNNF0Predictor + SourceModuleHnNSF/SineGen2 at
24 kHz): mel -> f0 -> harmonic sine source -> HiFi-GAN/iSTFT decoder, 480 samples per mel frame. Names
follow hift.pt (weight norm folded at load); the parts both CosyVoice vocoders share are in
models/codecs/hift/. Convolutions are centred (not causal).

Unlike CosyVoice 3's, the source draws fresh noise on every call from torch's generator, in this order:
`rand(1, 9)` (initial phases, which the /480 linear resampling then drops), `randn(1, N, 9)` (the sine
noise; `randn_like` of a transposed tensor, so drawn in [1, 9, N] order) and `randn(1, N, 1)`
(SourceModuleHnNSF's noise, unused at inference). `generate` takes the
request's own generator and draws the same values in the same order, so a request seeded N repeats
upstream's output after `torch.manual_seed(N)`.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..codecs.hift.config import HiFTConfig
from ..codecs.hift.parts import ResBlock, SourceModule, decode_body, hann_window, source_stft


def _pad(kernel: int, dilation: int = 1) -> int:
    return (kernel * dilation - dilation) // 2


def centred_conv(cin: int, cout: int, kernel: int, dilation: int = 1) -> nn.Conv1d:
    return nn.Conv1d(cin, cout, kernel, dilation=dilation, padding=_pad(kernel, dilation))


class F0Predictor(nn.Module):
    def __init__(self, c: HiFTConfig) -> None:
        super().__init__()
        ch = c.f0_cond_channels
        convs = [nn.Conv1d(c.f0_in_channels if i == 0 else ch, ch, 3, padding=1) for i in range(5)]
        self.condnet = nn.Sequential(*[m for conv in convs for m in (conv, nn.ELU())])
        self.classifier = nn.Linear(ch, c.f0_num_class)

    def forward(self, mel: torch.Tensor) -> torch.Tensor:
        return torch.abs(self.classifier(self.condnet(mel).transpose(1, 2)).squeeze(-1))


class HiFTWeights(nn.Module):
    """The state dict of hift.pt (weight norm folded)."""

    def __init__(self, c: HiFTConfig) -> None:
        super().__init__()
        self.c = c
        base = c.base_channels
        self.m_source = SourceModule(c.nb_harmonics)
        self.conv_pre = nn.Conv1d(c.in_channels, base, 7, padding=3)
        self.ups = nn.ModuleList(
            nn.ConvTranspose1d(base // 2**i, base // 2 ** (i + 1), k, u, padding=(k - u) // 2)
            for i, (u, k) in enumerate(zip(c.upsample_rates, c.upsample_kernel_sizes, strict=True))
        )
        downs = np.cumprod([1, *c.upsample_rates[::-1][:-1]])[::-1]
        self.source_downs = nn.ModuleList()
        self.source_resblocks = nn.ModuleList()
        for i, (u, k, d) in enumerate(
            zip(downs, c.source_resblock_kernel_sizes, c.source_resblock_dilation_sizes, strict=True)
        ):
            ch = base // 2 ** (i + 1)
            u = int(u)
            self.source_downs.append(
                nn.Conv1d(c.n_fft + 2, ch, 1) if u == 1
                else nn.Conv1d(c.n_fft + 2, ch, u * 2, u, padding=u // 2)
            )
            self.source_resblocks.append(ResBlock(ch, k, d, centred_conv))
        self.resblocks = nn.ModuleList(
            ResBlock(base // 2 ** (i + 1), k, d, centred_conv)
            for i in range(len(self.ups))
            for k, d in zip(c.resblock_kernel_sizes, c.resblock_dilation_sizes, strict=True)
        )
        self.conv_post = nn.Conv1d(base // 2 ** len(self.ups), c.n_fft + 2, 7, padding=3)
        self.f0_predictor = F0Predictor(c)


class HiFT:
    def __init__(self, weights: HiFTWeights, dtype: torch.dtype) -> None:
        self.w, self.c = weights, weights.c
        self.dtype = dtype  # the vocoder part's dtype (spec.DTYPE_POLICY)
        self.window_fn: torch.Tensor | None = None

    def source(self, f0: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """SineGen2 + SourceModuleHnNSF on f0 [1, T]: the merged source [1, 1, T * 480]."""
        c = self.c
        up = c.upsample
        dev = f0.device
        f0u = F.interpolate(f0[:, None], scale_factor=float(up), mode="nearest").transpose(1, 2)  # [1, N, 1]
        harm = torch.arange(1, c.nb_harmonics + 2, dtype=torch.float32, device=dev)[None, None]
        fn = f0u * harm
        rad = (fn / c.sampling_rate) % 1
        rand_ini = torch.rand(1, c.nb_harmonics + 1, generator=gen).to(dev, rad.dtype)
        rand_ini[:, 0] = 0
        rad[:, 0, :] = rad[:, 0, :] + rand_ini
        rad = F.interpolate(rad.transpose(1, 2), scale_factor=1 / up, mode="linear").transpose(1, 2)
        phase = torch.cumsum(rad, dim=1) * 2 * np.pi
        phase = F.interpolate(phase.transpose(1, 2) * up, scale_factor=float(up), mode="linear")
        phase = phase.transpose(1, 2)
        sines = torch.sin(phase) * c.nsf_alpha
        uv = (f0u > c.nsf_voiced_threshold).to(sines.dtype)
        noise_amp = uv * c.nsf_sigma + (1 - uv) * c.nsf_alpha / 3
        # upstream's randn_like keeps the sines' transposed layout ([1, 9, N] in memory), and torch fills
        # a non-contiguous tensor with another kernel than a contiguous one: draw into the same layout
        draw = torch.empty(1, sines.shape[2], sines.shape[1]).transpose(1, 2).normal_(generator=gen)
        noise = noise_amp * draw.to(dev, sines.dtype)
        sines = sines * uv + noise
        merged = torch.tanh(self.w.m_source.l_linear(sines.to(self.w.m_source.l_linear.weight.dtype)))
        torch.randn(uv.shape, generator=gen)  # SourceModuleHnNSF's noise: drawn, unused (keeps the order)
        return merged.transpose(1, 2)

    def generate(self, mel: torch.Tensor, cache_source: torch.Tensor | None,
                 gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        """Upstream's HiFTGenerator.inference: mel [80, T] -> (samples [T * 480], source [1, 1, T * 480]);
        cache_source replaces the start of the source (stream mode)."""
        f0 = self.w.f0_predictor(mel[None])
        s = self.source(f0, gen)
        if cache_source is not None and cache_source.shape[2]:
            s[:, :, : cache_source.shape[2]] = cache_source
        return self.decode(mel[None], s)[0], s

    def decode(self, x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        c, w = self.c, self.w
        if self.window_fn is None or self.window_fn.device != x.device:
            self.window_fn = hann_window(c.n_fft).to(x.device)
        s_stft = source_stft(c, s[:, 0], self.window_fn).to(x.dtype)
        x = w.conv_pre(x)
        out = decode_body(w, c, x, s_stft, self.window_fn.to(x.dtype))
        return torch.clamp(out, -c.audio_limit, c.audio_limit)
