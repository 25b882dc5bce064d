"""An ESPnet DAC codec pack's shape (its config.yaml's generator_params) and files, read without torch:
`vox voices` describes a SpeechLM checkpoint from its config files alone; espnet_dac.py builds the
decoder from the same shape."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base import CheckpointError

# DACGenerator's own defaults (what a generator_params that omits a key gets) and DAC's default
# generator_params (what a codec_conf without generator_params gets): they differ only in codebook_dim,
# which DAC's dict leaves to DACGenerator (8).
GENERATOR_DEFAULTS: dict[str, Any] = {
    "hidden_dim": 128, "codebook_dim": 8, "encdec_channels": 1, "encdec_n_filters": 32,
    "encdec_n_residual_layers": 1, "encdec_ratios": [8, 5, 4, 2], "encdec_activation": "Snake",
    "encdec_activation_params": {}, "encdec_norm": "weight_norm", "encdec_kernel_size": 7,
    "encdec_residual_kernel_size": 7, "encdec_last_kernel_size": 7, "encdec_dilation_base": 2,
    "encdec_causal": False, "encdec_pad_mode": "reflect", "encdec_true_skip": False, "encdec_compress": 2,
    "encdec_lstm": 2, "decoder_trim_right_ratio": 1.0, "decoder_final_activation": None,
    "decoder_final_activation_params": None, "quantizer_n_q": 8, "quantizer_bins": 1024,
}
NORMS = ("weight_norm", "none")  # the others (spectral, layer, group norm) are not ported


@dataclass(frozen=True)
class DacShape:
    sample_rate: int
    dim: int
    codebook_dim: int
    channels: int
    n_filters: int
    n_residual_layers: int
    ratios: tuple[int, ...]
    activation: str
    activation_params: dict
    norm: str
    kernel_size: int
    residual_kernel_size: int
    last_kernel_size: int
    dilation_base: int
    causal: bool
    pad_mode: str
    true_skip: bool
    compress: int
    lstm: int
    trim_right_ratio: float
    final_activation: str | None
    final_activation_params: dict | None
    n_q: int
    bins: int

    @property
    def hop(self) -> int:
        return math.prod(self.ratios)

    @classmethod
    def from_config(cls, cfg: dict[str, Any], where: str) -> DacShape:
        codec = cfg.get("codec")
        if codec != "dac":
            raise CheckpointError(f"{where}: codec {codec!r} is not decodable here (ESPnet's dac only)")
        conf = cfg.get("codec_conf") or {}
        given = conf.get("generator_params")
        gp = {**GENERATOR_DEFAULTS, **(given or {})}
        unknown = sorted(set(given or {}) - set(GENERATOR_DEFAULTS) - ENCODER_ONLY)
        if unknown:
            raise CheckpointError(f"{where}: codec_conf.generator_params.{unknown[0]} is not a DACGenerator "
                                  "parameter this decoder knows")
        if gp["encdec_norm"] not in NORMS:
            raise CheckpointError(f"{where}: codec_conf.generator_params.encdec_norm {gp['encdec_norm']!r} "
                                  f"is not supported (one of {', '.join(NORMS)})")
        if gp["encdec_pad_mode"] not in ("reflect", "constant", "replicate", "circular"):
            raise CheckpointError(f"{where}: encdec_pad_mode {gp['encdec_pad_mode']!r} is not an F.pad mode")
        return cls(sample_rate=int(conf.get("sampling_rate", 24000)), dim=int(gp["hidden_dim"]),
                   codebook_dim=int(gp["codebook_dim"]), channels=int(gp["encdec_channels"]),
                   n_filters=int(gp["encdec_n_filters"]),
                   n_residual_layers=int(gp["encdec_n_residual_layers"]),
                   ratios=tuple(int(r) for r in gp["encdec_ratios"]), activation=str(gp["encdec_activation"]),
                   activation_params=dict(gp["encdec_activation_params"] or {}), norm=str(gp["encdec_norm"]),
                   kernel_size=int(gp["encdec_kernel_size"]),
                   residual_kernel_size=int(gp["encdec_residual_kernel_size"]),
                   last_kernel_size=int(gp["encdec_last_kernel_size"]),
                   dilation_base=int(gp["encdec_dilation_base"]), causal=bool(gp["encdec_causal"]),
                   pad_mode=str(gp["encdec_pad_mode"]), true_skip=bool(gp["encdec_true_skip"]),
                   compress=int(gp["encdec_compress"]), lstm=int(gp["encdec_lstm"]),
                   trim_right_ratio=float(gp["decoder_trim_right_ratio"]),
                   final_activation=gp["decoder_final_activation"],
                   final_activation_params=gp["decoder_final_activation_params"],
                   n_q=int(gp["quantizer_n_q"]), bins=int(gp["quantizer_bins"]))


# generator_params keys only the encoder, the quantizer's training or the bandwidth use
ENCODER_ONLY = {"quantizer_decay", "quantizer_kmeans_init", "quantizer_kmeans_iters",
                "quantizer_threshold_ema_dead_code", "quantizer_target_bandwidth", "quantizer_dropout",
                "encdec_norm_params", "sample_rate"}


def pack_files(root: Path) -> tuple[Path, Path]:
    """(config.yaml, model .pth) that an espnet_model_zoo pack's meta.yaml names."""
    import yaml

    meta = root / "meta.yaml"
    if not meta.exists():
        raise CheckpointError(f"ESPnet codec folder {root} has no meta.yaml (an espnet_model_zoo pack)")
    m = yaml.safe_load(meta.read_text()) or {}
    try:
        cfg, model = root / m["yaml_files"]["train_config"], root / m["files"]["model_file"]
    except (KeyError, TypeError):
        raise CheckpointError(f"{meta} names no yaml_files.train_config and files.model_file") from None
    for p in (cfg, model):
        if not p.exists():
            raise CheckpointError(f"{meta} names {p}, which does not exist")
    return cfg, model
