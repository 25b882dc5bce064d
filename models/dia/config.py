"""Typed views of a Dia checkpoint's config.json and generation_config.json (transformers layout).

Defaults follow transformers' DiaConfig / DiaEncoderConfig / DiaDecoderConfig, so a config.json that
omits a field means the same here as in the reference. Only what the program needs is typed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..base import CheckpointError
from ..config_fields import first_int, get_dict, get_float, get_int, rope_theta


@dataclass(frozen=True)
class EncoderConfig:
    hidden_size: int = 1024
    intermediate_size: int = 4096
    num_hidden_layers: int = 12
    num_attention_heads: int = 16
    num_key_value_heads: int = 16
    head_dim: int = 128
    vocab_size: int = 256
    max_position_embeddings: int = 1024
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0


@dataclass(frozen=True)
class DecoderConfig:
    hidden_size: int = 2048
    intermediate_size: int = 8192
    num_hidden_layers: int = 18
    num_attention_heads: int = 16
    num_key_value_heads: int = 4
    head_dim: int = 128
    cross_num_attention_heads: int = 16
    cross_num_key_value_heads: int = 16
    cross_head_dim: int = 128
    cross_hidden_size: int = 1024
    vocab_size: int = 1028
    num_channels: int = 9
    max_position_embeddings: int = 3072
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0


@dataclass(frozen=True)
class DiaConfig:
    encoder: EncoderConfig
    decoder: DecoderConfig
    delay_pattern: tuple[int, ...] = (0, 8, 9, 10, 11, 12, 13, 14, 15)
    eos_token_id: int = 1024
    pad_token_id: int = 1025
    bos_token_id: int = 1026

    @property
    def max_delay(self) -> int:
        return max(self.delay_pattern)


@dataclass(frozen=True)
class GenerationDefaults:
    """generation_config.json, with transformers' GenerationConfig defaults for absent fields."""

    do_sample: bool = False
    temperature: float = 1.0
    top_k: int | None = 50
    top_p: float = 1.0
    guidance_scale: float | None = None
    max_length: int = 20
    max_new_tokens: int | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "generation_config.json") -> GenerationDefaults:
        """Absent or null -> transformers' default (top_k, guidance_scale and max_new_tokens: null means
        off); a value of the wrong kind -> CheckpointError naming the key and the file."""
        return cls(
            do_sample=bool(d.get("do_sample") or False),
            temperature=get_float(d, "temperature", 1.0, where),
            top_k=get_int(d, "top_k", None, where) if "top_k" in d else 50,
            top_p=get_float(d, "top_p", 1.0, where),
            guidance_scale=get_float(d, "guidance_scale", None, where),
            max_length=get_int(d, "max_length", 20, where),
            max_new_tokens=get_int(d, "max_new_tokens", None, where),
        )


def _sub(cls, d: dict[str, Any], where: str):
    """One sub-config: every typed field read with the defaults of transformers' classes (absent or null
    -> default), RoPE from rope_theta or rope_parameters (plain RoPE only)."""
    if d.get("hidden_act", "silu") not in ("silu", None):
        raise CheckpointError(f"{where}: hidden_act {d['hidden_act']!r} is not supported (silu only)")
    values: dict[str, Any] = {}
    for name, f in cls.__dataclass_fields__.items():
        if name == "rope_theta":
            values[name] = rope_theta(d, f.default, where)
        elif f.type == "float":
            values[name] = get_float(d, name, f.default, where)
        else:
            values[name] = get_int(d, name, f.default, where)
    return cls(**values)


def parse_config(d: dict[str, Any], where: str) -> DiaConfig:
    if d.get("model_type") != "dia":
        raise CheckpointError(f"{where} has model_type {d.get('model_type')!r}, expected 'dia'")
    enc_d = get_dict(d, "encoder_config", where)
    dec_d = get_dict(d, "decoder_config", where)
    enc = _sub(EncoderConfig, enc_d, f"{where} encoder_config")
    dec = _sub(DecoderConfig, dec_d, f"{where} decoder_config")
    pattern = d.get("delay_pattern") or (0, 8, 9, 10, 11, 12, 13, 14, 15)
    if not isinstance(pattern, list | tuple):
        raise CheckpointError(f"{where}: delay_pattern is {pattern!r}, expected a list of integers")
    delay = tuple(get_int({"delay_pattern": x}, "delay_pattern", None, where) for x in pattern)
    if len(delay) != dec.num_channels or min(delay) < 0 or delay[0] != 0:
        raise CheckpointError(
            f"{where}: delay_pattern {list(delay)} must have one entry >= 0 per channel "
            f"({dec.num_channels}) and start at 0"
        )
    # transformers 4.5x writes the special ids at the top; 5.x writes null there and keeps them in
    # decoder_config (DiaDecoderConfig's defaults are the same 1024/1025/1026)
    ids = [(d, where), (dec_d, f"{where} decoder_config")]
    cfg = DiaConfig(
        encoder=enc,
        decoder=dec,
        delay_pattern=delay,
        eos_token_id=first_int(ids, "eos_token_id", 1024),
        pad_token_id=first_int(ids, "pad_token_id", 1025),
        bos_token_id=first_int(ids, "bos_token_id", 1026),
    )
    if dec.cross_hidden_size != enc.hidden_size:
        raise CheckpointError(
            f"{where}: decoder cross_hidden_size {dec.cross_hidden_size} "
            f"!= encoder hidden_size {enc.hidden_size}"
        )
    return cfg
