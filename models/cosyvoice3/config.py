"""Typed view of a CosyVoice 3 checkpoint: `cosyvoice3.yaml` (CosyVoice3LM head, CausalMaskedDiffWithDiT
flow, causal HiFT) and `CosyVoice-BlankEN/config.json` (the Qwen2 backbone, models/flowlm/config.py).
Defaults are upstream's CosyVoice 3 values, so a file that omits a field means the same here as in the
reference."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..base import CheckpointError
from ..flowlm.config import FlowLMConfig, read_sections
from ..flowlm.yaml_config import pick_fields

YAML = "cosyvoice3.yaml"
FAMILY = "CosyVoice 3"


@dataclass(frozen=True)
class DiTConfig:
    dim: int = 1024
    depth: int = 22
    heads: int = 16
    dim_head: int = 64
    ff_mult: int = 2
    mel_dim: int = 80
    mu_dim: int = 80
    spk_dim: int = 80
    static_chunk_size: int = 50  # mel frames per block of the block-causal (streaming) attention


@dataclass(frozen=True)
class FlowConfig:
    dit: DiTConfig
    input_size: int = 80
    output_size: int = 80
    spk_embed_dim: int = 192
    vocab_size: int = 6561
    token_mel_ratio: int = 2
    pre_lookahead_len: int = 3
    lookahead_channels: int = 1024
    inference_cfg_rate: float = 0.7
    t_scheduler: str = "cosine"
    n_timesteps: int = 10  # hard-coded in upstream's CausalMaskedDiffWithDiT.inference


class CosyVoice3Config(FlowLMConfig[FlowConfig]):
    """A CosyVoice 3 checkpoint: the library's config with the DiT flow."""


def parse_config(root: Path) -> CosyVoice3Config:
    classes = ("CosyVoice3LM", "CausalMaskedDiffWithDiT", "CausalHiFTGenerator")
    sec = read_sections(root, YAML, FAMILY, classes)
    look = sec.flow.get("pre_lookahead_layer") or {}
    fl = FlowConfig(
        dit=DiTConfig(**pick_fields(sec.estimator(), DiTConfig)),
        **pick_fields(sec.flow, FlowConfig),
        lookahead_channels=int(look.get("channels", 1024)),
        **sec.cfm(),
    )
    if fl.dit.static_chunk_size % fl.token_mel_ratio:
        raise CheckpointError(
            f"{sec.where}: static_chunk_size {fl.dit.static_chunk_size} is not a whole number "
            f"of tokens (token_mel_ratio {fl.token_mel_ratio})"
        )
    return CosyVoice3Config(lm=sec.lm, flow=fl, hift=sec.hift, **sec.rates(), raw=sec.raw)
