"""The three features upstream's zero-shot frontend (cosyvoice/cli/frontend.py) takes from a reference clip,
computed as it computes them:

- speech-tokenizer input: Whisper's `log_mel_spectrogram(speech_16k, n_mels=128)`: centred STFT (n_fft 400,
  hop 160, periodic Hann, reflect padding), the last frame dropped, power, 128 Slaney mel filters
  (0..8 kHz, librosa's), log10(max(x, 1e-10)) floored at (its max - 8), then (x + 4) / 4 -> [1, 128, T];
- speaker-embedding input: Kaldi fbank (80 bins, kaldi_fbank.py) minus its mean over frames -> [1, T, 80];
- prompt mel for the flow: the checkpoint's `feat_extractor` (Matcha-TTS `mel_spectrogram`; Fun-CosyVoice3:
  n_fft 1920, hop 480, 80 mels, 24 kHz, fmax = Nyquist) of the clip at 24 kHz -> [T, 80].

The clip is mono float32; each feature resamples it from its own rate
(models/audio/torchaudio_resample.py), as upstream's `load_wav(wav, 16000)` / `load_wav(wav, 24000)` do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..audio.mel import log_mel, slaney_mel_filters
from ..audio.torchaudio_resample import resample
from ..base import CheckpointError
from .kaldi_fbank import fbank

TOKENIZER_RATE = 16000
WHISPER_N_FFT, WHISPER_HOP, WHISPER_MELS = 400, 160, 128


def whisper_log_mel(speech16k: torch.Tensor) -> torch.Tensor:
    """[1, n] float32 at 16 kHz -> [1, 128, n // 160] (Whisper's log-mel, no padding)."""
    window = torch.hann_window(WHISPER_N_FFT)
    stft = torch.stft(speech16k, WHISPER_N_FFT, WHISPER_HOP, window=window, return_complex=True)
    power = stft[..., :-1].abs() ** 2
    filters = torch.from_numpy(slaney_mel_filters(TOKENIZER_RATE, WHISPER_N_FFT, WHISPER_MELS, 0.0, 8000.0))
    log_spec = torch.clamp(filters @ power, min=1e-10).log10()
    log_spec = torch.maximum(log_spec, log_spec.max() - 8.0)
    return (log_spec + 4.0) / 4.0


def campplus_features(speech16k: torch.Tensor) -> torch.Tensor:
    """[1, n] float32 at 16 kHz -> [1, frames, 80] mean-normalised Kaldi fbank."""
    feat = fbank(speech16k, num_mel_bins=80, rate=TOKENIZER_RATE)
    return (feat - feat.mean(dim=0, keepdim=True)).unsqueeze(0)


@dataclass(frozen=True)
class MelParams:
    """The flow's prompt-mel extractor (the `feat_extractor` of cosyvoice3.yaml)."""

    sample_rate: int = 24000
    n_fft: int = 1920
    hop: int = 480
    win: int = 1920
    n_mels: int = 80
    fmin: float = 0.0
    fmax: float | None = None  # None: Nyquist (librosa's default)

    @classmethod
    def from_yaml(cls, raw: dict[str, Any], where: str) -> MelParams:
        fe = raw.get("feat_extractor")
        if fe is None:
            return cls()
        if not isinstance(fe, dict) or not str(fe.get("__class__", "")).endswith("mel_spectrogram"):
            raise CheckpointError(
                f"{where}: feat_extractor is {fe!r}; voxcli computes only Matcha-TTS's mel_spectrogram"
            )
        if fe.get("center", False):
            raise CheckpointError(
                f"{where}: feat_extractor has center: True; only center: False is supported"
            )
        d = cls()
        return cls(
            sample_rate=int(fe.get("sampling_rate", d.sample_rate)),
            n_fft=int(fe.get("n_fft", d.n_fft)),
            hop=int(fe.get("hop_size", d.hop)),
            win=int(fe.get("win_size", d.win)),
            n_mels=int(fe.get("num_mels", d.n_mels)),
            fmin=float(fe.get("fmin", d.fmin) or 0.0),
            fmax=None if fe.get("fmax") is None else float(fe["fmax"]),
        )


def prompt_mel(speech: torch.Tensor, p: MelParams) -> torch.Tensor:
    """[1, n] float32 at p.sample_rate -> [frames, n_mels]."""
    fmax = p.fmax if p.fmax is not None else p.sample_rate / 2
    return log_mel(speech, p.sample_rate, p.n_fft, p.hop, p.win, p.n_mels, p.fmin, fmax)[0]


@dataclass
class ClipFeatures:
    whisper_mel: torch.Tensor  # [1, 128, T100]  (speech tokenizer input)
    fbank: torch.Tensor  # [1, T100', 80]  (speaker embedding input)
    mel: torch.Tensor  # [T50, n_mels]  (the flow's prompt mel, before the token alignment)


def clip_features(wav: torch.Tensor, rate: int, mel: MelParams) -> ClipFeatures:
    """wav [n] mono float32 at `rate` (>= 16 kHz) -> the frontend's three features."""
    speech = wav.reshape(1, -1).float()
    s16 = resample(speech, rate, TOKENIZER_RATE)
    s24 = resample(speech, rate, mel.sample_rate)
    return ClipFeatures(whisper_log_mel(s16), campplus_features(s16), prompt_mel(s24, mel))
