"""A checkpoint's rotary settings: plain RoPE (a base `theta`) or Llama 3's frequency scaling, read from
config.json's `rope_parameters` / `rope_scaling` (transformers' two spellings)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..base import CheckpointError


@dataclass(frozen=True)
class Rope:
    rope_type: str = "default"  # "default" | "llama3"
    theta: float = 10000.0
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192


def parse_rope(d: dict[str, Any], where: str, fallback: dict[str, Any]) -> Rope:
    """The rope of config dict `d` (`where` names the file in errors); `fallback` holds the family's
    defaults for the keys `d` omits."""
    rp = d.get("rope_parameters") or d.get("rope_scaling") or {}
    theta = rp.get("rope_theta", d.get("rope_theta", fallback.get("rope_theta", 10000.0)))
    rtype = rp.get("rope_type", rp.get("type", fallback.get("rope_type", "default") if not rp else "default"))
    if rtype not in ("default", "llama3"):
        raise CheckpointError(f"{where}: rope type {rtype!r} is not supported (default or llama3)")
    if rtype == "llama3":
        src = {**fallback, **rp}
        try:
            return Rope(
                "llama3",
                float(theta),
                float(src["factor"]),
                float(src["low_freq_factor"]),
                float(src["high_freq_factor"]),
                int(src.get("original_max_position_embeddings", d.get("max_position_embeddings", 8192))),
            )
        except KeyError as e:
            raise CheckpointError(f"{where}: llama3 rope parameters lack {e.args[0]!r}") from None
    return Rope("default", float(theta))


@dataclass(frozen=True)
class BlockConfig:
    """One decoder stack's dimensions (a Qwen3 stack unless told otherwise)."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1e6
    attention_bias: bool = False  # on q/k/v, and on o_proj unless `output_bias` says otherwise
    hidden_act: str = "silu"
    max_position_embeddings: int = 32768
    qk_norm: bool = True  # Qwen3's per-head q/k RMSNorm; Llama and Qwen2 have none
    output_bias: bool | None = None
