"""Orpheus's LM configuration from config.json (transformers `LlamaConfig` field names) and its generation
defaults from generation_config.json. The field names are transformers' (the Llama block
is the layer library's, models/layers); every missing or invalid field is a CheckpointError naming it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..base import CheckpointError
from ..layers.config import Rope
from .tokens import VOCAB_MIN

# canopyai/Orpheus-TTS's serving defaults (engine_class.py: temperature 0.6, top_p 0.8, repetition
# penalty 1.3, max_tokens 1200) for a checkpoint whose generation_config.json does not set them.
DEFAULT_TEMPERATURE = 0.6
DEFAULT_TOP_P = 0.8
DEFAULT_REPETITION_PENALTY = 1.3
DEFAULT_MAX_NEW_TOKENS = 1200


@dataclass(frozen=True)
class OrpheusConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    max_position_embeddings: int
    rms_norm_eps: float
    rope: Rope
    tie_word_embeddings: bool
    attention_bias: bool = False


def _get(d: dict[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in d:
        raise CheckpointError(f"{where}: field {key!r} is missing")
    v = d[key]
    if kind is int and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
        raise CheckpointError(f"{where}: field {key!r} must be a positive whole number, got {v!r}")
    if kind is float and (
        isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0
    ):
        raise CheckpointError(f"{where}: field {key!r} must be a positive number, got {v!r}")
    return v


def parse_config(d: dict[str, Any], where: str) -> OrpheusConfig:
    if d.get("model_type") != "llama":
        raise CheckpointError(
            f"{where}: model_type {d.get('model_type')!r} is not an Orpheus (llama) checkpoint"
        )
    if d.get("hidden_act", "silu") != "silu" or d.get("mlp_bias", False):
        raise CheckpointError(f"{where}: only a silu MLP without bias is supported (Llama-3.2's)")
    heads = _get(d, "num_attention_heads", int, where)
    hidden = _get(d, "hidden_size", int, where)
    head_dim = d.get("head_dim") or hidden // heads
    kv = d.get("num_key_value_heads", heads)
    if heads % kv:
        raise CheckpointError(
            f"{where}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}"
        )
    vocab = _get(d, "vocab_size", int, where)
    if vocab < VOCAB_MIN:
        raise CheckpointError(
            f"{where}: vocab_size {vocab} cannot hold Orpheus's audio tokens (ids up to "
            f"{VOCAB_MIN - 1}); is this an Orpheus checkpoint?"
        )
    rs = d.get("rope_scaling") or d.get("rope_parameters") or {}
    theta = float(d.get("rope_theta", rs.get("rope_theta", 500000.0)))
    kind = rs.get("rope_type", rs.get("type", "default")) or "default"
    if kind not in ("default", "llama3"):
        raise CheckpointError(f"{where}: rope type {kind!r} is not supported (default or llama3)")
    rope = (
        Rope(rope_type=kind, theta=theta)
        if kind == "default"
        else Rope(
            rope_type="llama3",
            theta=theta,
            factor=float(rs["factor"]),
            low_freq_factor=float(rs["low_freq_factor"]),
            high_freq_factor=float(rs["high_freq_factor"]),
            original_max_position_embeddings=int(rs["original_max_position_embeddings"]),
        )
    )
    return OrpheusConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=_get(d, "intermediate_size", int, where),
        num_hidden_layers=_get(d, "num_hidden_layers", int, where),
        num_attention_heads=heads,
        num_key_value_heads=int(kv),
        head_dim=int(head_dim),
        max_position_embeddings=_get(d, "max_position_embeddings", int, where),
        rms_norm_eps=float(_get(d, "rms_norm_eps", float, where)),
        rope=rope,
        tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
        attention_bias=bool(d.get("attention_bias", False)),
    )


@dataclass(frozen=True)
class GenerationDefaults:
    temperature: float = DEFAULT_TEMPERATURE
    top_p: float = DEFAULT_TOP_P
    top_k: int = 0
    repetition_penalty: float = DEFAULT_REPETITION_PENALTY
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    do_sample: bool = True

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GenerationDefaults:
        base = cls()
        return cls(
            temperature=float(d.get("temperature", base.temperature)),
            top_p=float(d.get("top_p", base.top_p)),
            top_k=int(d.get("top_k", 0) or 0),
            repetition_penalty=float(d.get("repetition_penalty", base.repetition_penalty)),
            max_new_tokens=int(d.get("max_new_tokens") or base.max_new_tokens),
            do_sample=bool(d.get("do_sample", True)),
        )
