"""ECAPA-TDNN speaker encoder (x-vector) of Qwen3-TTS Base checkpoints, with its log-mel front end.

Keys: `speaker_encoder.*` in the main model.safetensors; config: `speaker_encoder_config` in config.json.
Front end (24 kHz only): reflect pad 384 each side, STFT n_fft 1024 / hop 256 / Hann 1024, center False,
magnitude sqrt(re^2 + im^2 + 1e-9), 128 Slaney-normalised mel filters 0..12 kHz, log(clamp(., 1e-5)).
The log-mel front end is the shared one (models/audio/mel.py: its defaults are this encoder's).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..audio.mel import HOP, N_FFT, log_mel
from ..base import CheckpointError, InputError
from .mimi_encoder import check_reference_audio
from .weights_check import load_checked

SAMPLE_RATE = 24000


# --- ECAPA-TDNN ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SpeakerEncoderConfig:
    mel_dim: int = 128
    enc_dim: int = 1024
    enc_channels: tuple[int, ...] = (512, 512, 512, 512, 1536)
    enc_kernel_sizes: tuple[int, ...] = (5, 3, 3, 3, 1)
    enc_dilations: tuple[int, ...] = (1, 2, 3, 4, 1)
    enc_attention_channels: int = 128
    enc_res2net_scale: int = 8
    enc_se_channels: int = 128
    sample_rate: int = SAMPLE_RATE

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SpeakerEncoderConfig:
        known = {
            k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items() if k in cls.__dataclass_fields__
        }
        return cls(**known)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mel_dim": self.mel_dim,
            "enc_dim": self.enc_dim,
            "enc_channels": list(self.enc_channels),
            "enc_kernel_sizes": list(self.enc_kernel_sizes),
            "enc_dilations": list(self.enc_dilations),
            "enc_attention_channels": self.enc_attention_channels,
            "enc_res2net_scale": self.enc_res2net_scale,
            "enc_se_channels": self.enc_se_channels,
            "sample_rate": self.sample_rate,
        }


def _same_conv(cin: int, cout: int, kernel: int, dilation: int = 1) -> nn.Conv1d:
    return nn.Conv1d(cin, cout, kernel, dilation=dilation, padding="same", padding_mode="reflect")


class TDNNBlock(nn.Module):
    def __init__(self, cin: int, cout: int, kernel: int, dilation: int) -> None:
        super().__init__()
        self.conv = _same_conv(cin, cout, kernel, dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


class Res2NetBlock(nn.Module):
    """Channels split in `scale` parts; part i>0 goes through a TDNN after adding the previous output."""

    def __init__(self, channels: int, scale: int, kernel: int, dilation: int) -> None:
        super().__init__()
        self.scale = scale
        self.blocks = nn.ModuleList(
            [TDNNBlock(channels // scale, channels // scale, kernel, dilation) for _ in range(scale - 1)]
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outs: list[torch.Tensor] = []
        for i, part in enumerate(torch.chunk(x, self.scale, dim=1)):
            if i == 0:
                out = part
            elif i == 1:
                out = self.blocks[0](part)
            else:
                out = self.blocks[i - 1](part + out)
            outs.append(out)
        return torch.cat(outs, dim=1)


class SEBlock(nn.Module):
    def __init__(self, channels: int, se_channels: int) -> None:
        super().__init__()
        self.conv1 = _same_conv(channels, se_channels, 1)
        self.conv2 = _same_conv(se_channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.sigmoid(self.conv2(torch.relu(self.conv1(x.mean(dim=2, keepdim=True)))))
        return x * s


class SERes2NetBlock(nn.Module):
    def __init__(self, cin: int, cout: int, scale: int, se_channels: int, kernel: int, dilation: int) -> None:
        super().__init__()
        self.tdnn1 = TDNNBlock(cin, cout, 1, 1)
        self.res2net_block = Res2NetBlock(cout, scale, kernel, dilation)
        self.tdnn2 = TDNNBlock(cout, cout, 1, 1)
        self.se_block = SEBlock(cout, se_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.se_block(self.tdnn2(self.res2net_block(self.tdnn1(x)))) + x


class AttentiveStatsPool(nn.Module):
    """Attention over time conditioned on the global mean/std, then the weighted mean and std."""

    def __init__(self, channels: int, attention_channels: int) -> None:
        super().__init__()
        self.tdnn = TDNNBlock(channels * 3, attention_channels, 1, 1)
        self.conv = _same_conv(attention_channels, channels, 1)

    @staticmethod
    def _stats(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean = (w * x).sum(2)
        std = torch.sqrt((w * (x - mean.unsqueeze(2)).pow(2)).sum(2).clamp(1e-12))
        return mean, std

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[-1]
        uniform = torch.full((x.shape[0], 1, t), 1.0 / t, dtype=x.dtype, device=x.device)
        mean, std = self._stats(x, uniform)
        ctx = torch.cat([x, mean.unsqueeze(2).expand(-1, -1, t), std.unsqueeze(2).expand(-1, -1, t)], dim=1)
        attn = F.softmax(self.conv(torch.tanh(self.tdnn(ctx))), dim=2)
        mean, std = self._stats(x, attn)
        return torch.cat([mean, std], dim=1).unsqueeze(2)


class SpeakerEncoder(nn.Module):
    """Official key layout: blocks.0 (TDNN), blocks.1..3 (SE-Res2Net), mfa, asp, fc."""

    def __init__(self, cfg: SpeakerEncoderConfig) -> None:
        super().__init__()
        ch, ks, dl = cfg.enc_channels, cfg.enc_kernel_sizes, cfg.enc_dilations
        if not len(ch) == len(ks) == len(dl):
            raise ValueError("enc_channels, enc_kernel_sizes and enc_dilations must have the same length")
        self.cfg = cfg
        self.blocks = nn.ModuleList(
            [TDNNBlock(cfg.mel_dim, ch[0], ks[0], dl[0])]
            + [
                SERes2NetBlock(ch[i - 1], ch[i], cfg.enc_res2net_scale, cfg.enc_se_channels, ks[i], dl[i])
                for i in range(1, len(ch) - 1)
            ]
        )
        self.mfa = TDNNBlock(ch[-1], ch[-1], ks[-1], dl[-1])
        self.asp = AttentiveStatsPool(ch[-1], cfg.enc_attention_channels)
        self.fc = _same_conv(ch[-1] * 2, cfg.enc_dim, 1)

    def forward(self, mels: torch.Tensor) -> torch.Tensor:
        """mels [B, frames, mel_dim] -> x-vectors [B, enc_dim]."""
        h = mels.transpose(1, 2)
        feats = []
        for block in self.blocks:
            h = block(h)
            feats.append(h)
        h = self.mfa(torch.cat(feats[1:], dim=1))
        return self.fc(self.asp(h)).squeeze(-1)

    @torch.inference_mode()
    def x_vector(self, wav: np.ndarray, sample_rate: int = SAMPLE_RATE) -> torch.Tensor:
        """Reference clip (mono float32, 24 kHz) -> speaker embedding [enc_dim]. Raises InputError."""
        x = check_reference_audio(wav, sample_rate, self.cfg.sample_rate)
        # The reflect padding of the front end needs more than 384 samples.
        if x.size <= (N_FFT - HOP) // 2:
            raise InputError(
                f"the reference audio is too short ({x.size} samples): give at least "
                f"{N_FFT} samples (about 0.05 s), ideally a few seconds"
            )
        p = next(self.parameters())
        mels = log_mel(torch.from_numpy(x).to(p.device)[None])
        return self(mels.to(p.dtype))[0]

    @classmethod
    def from_checkpoint(
        cls, path: str | Path, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32
    ) -> SpeakerEncoder:
        """Load from a Base checkpoint dir: config.json `speaker_encoder_config` + model.safetensors."""
        root = Path(path)
        try:
            cfg_all = json.loads((root / "config.json").read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise CheckpointError(f"cannot read {root / 'config.json'}: {e}") from e
        if "speaker_encoder_config" not in cfg_all:
            raise CheckpointError(
                f"{root / 'config.json'} has no speaker_encoder_config: only Base (voice "
                "clone) checkpoints carry a speaker encoder"
            )
        with torch.device("meta"):
            enc = cls(SpeakerEncoderConfig.from_dict(cfg_all["speaker_encoder_config"]))
        load_checked(enc, root / "model.safetensors", prefix="speaker_encoder.", device=device, dtype=dtype)
        return enc.eval()
