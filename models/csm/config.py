"""CSM-1B's config.json (`model_type` csm, transformers' CsmConfig) and generation_config.json.

The backbone is Llama-3.2-1B-shaped (16 layers, 2048 wide, llama3 RoPE); `depth_decoder_config` the
100M-shaped depth decoder (4 layers, 1024 wide) whose embeddings live in the backbone's width;
`codec_config` a transformers MimiConfig (models/codecs/mimi). Absent or null fields take CsmConfig's
defaults, a value of the wrong kind is a CheckpointError naming the key and the file
(models/config_fields.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base import CheckpointError
from ..codecs.mimi.config import MimiConfig
from ..config_fields import get_dict, get_float, get_int
from ..layers.config import Rope, parse_rope
from ..locate import read_json


@dataclass(frozen=True)
class Block:
    """One Llama stack's dimensions."""

    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    rope: Rope
    max_position_embeddings: int


@dataclass(frozen=True)
class CsmConfig:
    backbone: Block
    depth: Block
    codec: MimiConfig
    num_codebooks: int  # K: codebook 0 from the backbone, 1..K-1 from the depth decoder
    vocab_size: int  # audio ids per codebook (2051: Mimi's 2048 + pad/eos room)
    text_vocab_size: int
    codebook_eos_token_id: int  # a frame whose codebooks 0..K-2 all hold it ends the utterance
    codebook_pad_token_id: int
    audio_token_id: int  # <|AUDIO|>: one context-audio frame
    audio_eos_token_id: int  # <|audio_eos|>: the all-eos frame after a context clip
    bos_token_id: int
    tie_codebooks_embeddings: bool


def _block(d: dict[str, Any], where: str, defaults: dict[str, Any]) -> Block:
    def i(key: str) -> int:
        return get_int(d, key, defaults[key], where)

    hidden, heads = i("hidden_size"), i("num_attention_heads")
    return Block(
        hidden_size=hidden,
        intermediate_size=i("intermediate_size"),
        num_layers=i("num_hidden_layers"),
        num_heads=heads,
        num_kv_heads=get_int(d, "num_key_value_heads", heads, where),
        head_dim=get_int(d, "head_dim", hidden // heads, where),
        rms_norm_eps=get_float(d, "rms_norm_eps", 1e-5, where),
        rope=parse_rope(d, where, {"rope_theta": 500000.0}),
        max_position_embeddings=i("max_position_embeddings"),
    )


BACKBONE = dict(
    hidden_size=2048,
    intermediate_size=8192,
    num_hidden_layers=16,
    num_attention_heads=32,
    max_position_embeddings=2048,
)
DEPTH = dict(
    hidden_size=1024,
    intermediate_size=8192,
    num_hidden_layers=4,
    num_attention_heads=8,
    max_position_embeddings=33,
)


def parse_config(d: dict[str, Any], where: str) -> CsmConfig:
    if d.get("model_type") != "csm":
        raise CheckpointError(f"{where}: model_type {d.get('model_type')!r} is not a CSM checkpoint (csm)")
    codec = get_dict(d, "codec_config", where, required=True)
    if codec.get("model_type", "mimi") != "mimi":
        raise CheckpointError(f"{where}: codec_config model_type {codec.get('model_type')!r} is not mimi")
    depth = get_dict(d, "depth_decoder_config", where, required=True)
    cfg = CsmConfig(
        backbone=_block(d, where, BACKBONE),
        depth=_block(depth, f"{where} depth_decoder_config", DEPTH),
        codec=MimiConfig.from_dict(codec, f"{where} codec_config"),
        num_codebooks=get_int(d, "num_codebooks", 32, where),
        vocab_size=get_int(d, "vocab_size", 2051, where),
        text_vocab_size=get_int(d, "text_vocab_size", 128256, where),
        codebook_eos_token_id=get_int(d, "codebook_eos_token_id", 0, where),
        codebook_pad_token_id=get_int(d, "codebook_pad_token_id", 2050, where),
        audio_token_id=get_int(d, "audio_token_id", 128002, where),
        audio_eos_token_id=get_int(d, "audio_eos_token_id", 128003, where),
        bos_token_id=get_int(d, "bos_token_id", 128000, where),
        tie_codebooks_embeddings=bool(d.get("tie_codebooks_embeddings", True)),
    )
    dk = get_int(depth, "num_codebooks", cfg.num_codebooks, f"{where} depth_decoder_config")
    bb = get_int(depth, "backbone_hidden_size", cfg.backbone.hidden_size, f"{where} depth_decoder_config")
    if dk != cfg.num_codebooks or bb != cfg.backbone.hidden_size:
        raise CheckpointError(
            f"{where}: depth_decoder_config disagrees with the backbone (num_codebooks {dk} vs "
            f"{cfg.num_codebooks}, backbone_hidden_size {bb} vs {cfg.backbone.hidden_size})"
        )
    if cfg.codec.num_quantizers < cfg.num_codebooks or cfg.codec.codebook_size > cfg.vocab_size:
        raise CheckpointError(
            f"{where}: codec_config has {cfg.codec.num_quantizers} quantizers of "
            f"{cfg.codec.codebook_size}; CSM needs {cfg.num_codebooks} of at most {cfg.vocab_size}"
        )
    return cfg


@dataclass(frozen=True)
class GenerationDefaults:
    """generation_config.json: the backbone's sampling and the depth decoder's (`depth_decoder_*`)."""

    # transformers' GenerationConfig defaults, what an absent key means (the released file samples both)
    do_sample: bool = False
    temperature: float = 1.0
    top_k: int = 50
    top_p: float = 1.0
    depth_do_sample: bool = False
    depth_temperature: float = 1.0
    depth_top_k: int = 50
    depth_top_p: float = 1.0
    max_new_tokens: int | None = None  # frames; CSM's max_length counts generated frames too

    @classmethod
    def read(cls, path: Path) -> GenerationDefaults:
        if not path.exists():
            return cls()
        d, where = read_json(path), str(path)
        g = cls()
        return cls(
            do_sample=bool(d.get("do_sample", False)),
            temperature=get_float(d, "temperature", 1.0, where),
            top_k=get_int(d, "top_k", 50, where),
            top_p=get_float(d, "top_p", 1.0, where),
            depth_do_sample=bool(d.get("depth_decoder_do_sample", False)),
            depth_temperature=get_float(d, "depth_decoder_temperature", 1.0, where),
            depth_top_k=get_int(d, "depth_decoder_top_k", 50, where),
            depth_top_p=get_float(d, "depth_decoder_top_p", 1.0, where),
            max_new_tokens=get_int(
                d, "max_new_tokens", get_int(d, "max_length", g.max_new_tokens, where), where
            ),
        )
