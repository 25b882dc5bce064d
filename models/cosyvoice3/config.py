"""Typed view of a CosyVoice 3 checkpoint: `cosyvoice3.yaml` (CosyVoice3LM head, CausalMaskedDiffWithDiT
flow, causal HiFT) and `CosyVoice-BlankEN/config.json` (the Qwen2 backbone, models/flowlm/config.py).
Defaults are upstream's CosyVoice 3 values, so a file that omits a field means the same here as in the
reference."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import CheckpointError
from ..codecs.hift.config import HiFTConfig, parse_hift
from ..flowlm.config import LMConfig, parse_lm
from ..flowlm.yaml_config import pick_fields, read_hyperpyyaml, yaml_section

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


@dataclass(frozen=True)
class CosyVoice3Config:
    lm: LMConfig
    flow: FlowConfig
    hift: HiFTConfig
    sample_rate: int = 24000
    token_frame_rate: int = 25
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


def parse_config(root: Path) -> CosyVoice3Config:
    where = root / YAML
    raw = read_hyperpyyaml(where)
    llm = yaml_section(raw, "llm", where, "CosyVoice3LM", FAMILY)
    flow = yaml_section(raw, "flow", where, "CausalMaskedDiffWithDiT", FAMILY)
    hift = yaml_section(raw, "hift", where, "CausalHiFTGenerator", FAMILY)
    lm = parse_lm(root, llm)
    dec = flow.get("decoder") or {}
    est = dec.get("estimator") or {}
    cfm = ((dec.get("cfm_params") or {}).get("content")) or {}
    look = flow.get("pre_lookahead_layer") or {}
    fl = FlowConfig(
        dit=DiTConfig(**pick_fields(est, DiTConfig)),
        **pick_fields(flow, FlowConfig),
        lookahead_channels=int(look.get("channels", 1024)),
        inference_cfg_rate=float(cfm.get("inference_cfg_rate", 0.7)),
        t_scheduler=str(cfm.get("t_scheduler", "cosine")),
    )
    hf = parse_hift(hift)
    if fl.dit.static_chunk_size % fl.token_mel_ratio:
        raise CheckpointError(
            f"{where}: static_chunk_size {fl.dit.static_chunk_size} is not a whole number "
            f"of tokens (token_mel_ratio {fl.token_mel_ratio})"
        )
    return CosyVoice3Config(
        lm=lm,
        flow=fl,
        hift=hf,
        sample_rate=int(raw.get("sample_rate", 24000)),
        token_frame_rate=int(raw.get("token_frame_rate", 25)),
        raw=raw,
    )
