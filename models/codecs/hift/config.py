"""The `hift` section of a CosyVoice-style HyperPyYAML file (HiFTGenerator and CausalHiFTGenerator have
the same fields); defaults are the released 24 kHz vocoder's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...flowlm.yaml_config import pick_fields


@dataclass(frozen=True)
class HiFTConfig:
    in_channels: int = 80
    base_channels: int = 512
    nb_harmonics: int = 8
    sampling_rate: int = 24000
    nsf_alpha: float = 0.1
    nsf_sigma: float = 0.003
    nsf_voiced_threshold: float = 10
    upsample_rates: tuple[int, ...] = (8, 5, 3)
    upsample_kernel_sizes: tuple[int, ...] = (16, 11, 7)
    n_fft: int = 16
    hop_len: int = 4
    resblock_kernel_sizes: tuple[int, ...] = (3, 7, 11)
    resblock_dilation_sizes: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    source_resblock_kernel_sizes: tuple[int, ...] = (7, 7, 11)
    source_resblock_dilation_sizes: tuple[tuple[int, ...], ...] = ((1, 3, 5), (1, 3, 5), (1, 3, 5))
    lrelu_slope: float = 0.1
    audio_limit: float = 0.99
    conv_pre_look_right: int = 4
    f0_in_channels: int = 80
    f0_cond_channels: int = 512
    f0_num_class: int = 1

    @property
    def upsample(self) -> int:  # samples per mel frame: prod(upsample_rates) * hop_len (480 real)
        n = self.hop_len
        for r in self.upsample_rates:
            n *= r
        return n


def parse_hift(hift: dict[str, Any]) -> HiFTConfig:
    """The `hift` section: its own fields, istft_params and the f0 predictor's sizes."""
    f0 = hift.get("f0_predictor") or {}
    istft = hift.get("istft_params") or {}
    return HiFTConfig(
        **pick_fields(hift, HiFTConfig),
        n_fft=int(istft.get("n_fft", 16)),
        hop_len=int(istft.get("hop_len", 4)),
        f0_in_channels=int(f0.get("in_channels", 80)),
        f0_cond_channels=int(f0.get("cond_channels", 512)),
        f0_num_class=int(f0.get("num_class", 1)),
    )
