"""Higgs Audio configuration, read from config.json (transformers `HiggsAudioV2Config` field names) and
generation_config.json. Only what inference needs; every missing or invalid field is a CheckpointError naming
the key and the file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..base import CheckpointError
from ..layers.config import Rope, parse_rope

# transformers' HiggsAudioV2Config defaults (the Llama-3.2-3B backbone of bosonai/higgs-audio-v2), except
# codebook_size: the class default 1024 is wrong for every released checkpoint (1024 codes + stream BOS/EOS).
V2_DEFAULTS: dict[str, Any] = {
    "vocab_size": 128256,
    "hidden_size": 3072,
    "intermediate_size": 8192,
    "num_hidden_layers": 28,
    "num_attention_heads": 24,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "max_position_embeddings": 2048,
    "rms_norm_eps": 1e-5,
    "num_codebooks": 8,
    "codebook_size": 1026,
    "audio_token_id": 128016,
    "audio_bos_token_id": 128013,
    "audio_delay_token_id": 128014,
    "audio_stream_bos_id": 1024,
    "audio_stream_eos_id": 1025,
    "eos_token_id": 128009,
    "bos_token_id": 1,
    "attention_bias": False,
    "mlp_bias": False,
    "hidden_act": "silu",
}
V2_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 32.0,
    "high_freq_factor": 0.5,
    "low_freq_factor": 0.125,
    "original_max_position_embeddings": 1024,
}


@dataclass(frozen=True)
class HiggsConfig:
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    max_position_embeddings: int
    rms_norm_eps: float
    num_codebooks: int
    codebook_size: int  # per codebook, incl. stream BOS / EOS
    audio_token_id: int
    audio_bos_token_id: int
    audio_delay_token_id: int
    audio_stream_bos_id: int
    audio_stream_eos_id: int
    eos_token_id: int
    rope: Rope
    dual_ffn: bool = True  # v2: audio positions go through audio_* norms and MLP
    qk_norm: bool = False  # v3 (Qwen3): RMSNorm on q and k per head
    attention_bias: bool = False
    tie_word_embeddings: bool = False
    variant: str = "v2"  # "v2" (transformers layout), "boson" (original v2 layout), "v3"

    @property
    def delay(self) -> tuple[int, ...]:
        """Codebook k's delay in steps after the all-BOS first frame (transformers' pattern: k + 1)."""
        return tuple(k + 1 for k in range(self.num_codebooks))

    @property
    def codes_per_book(self) -> int:
        """Real codes (the stream BOS id is the first special one)."""
        return self.audio_stream_bos_id


def _int(d: dict[str, Any], key: str, where: str, default: Any = None) -> int:
    v = d.get(key, default)
    if isinstance(v, list) and v and key == "eos_token_id":
        v = v[0]
    if isinstance(v, bool) or not isinstance(v, int):
        raise CheckpointError(f"{where}: field {key!r} must be an integer, got {v!r}")
    return v


def parse_v2(d: dict[str, Any], where: str) -> HiggsConfig:
    """A transformers-layout (`higgs_audio_v2`) config.json."""
    g = {**V2_DEFAULTS, **{k: v for k, v in d.items() if v is not None}}
    ints = (
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "max_position_embeddings",
        "num_codebooks",
        "codebook_size",
        "audio_token_id",
        "audio_bos_token_id",
        "audio_delay_token_id",
        "audio_stream_bos_id",
        "audio_stream_eos_id",
        "eos_token_id",
    )
    vals = {k: _int(g, k, where) for k in ints}
    head_dim = g.get("head_dim") or vals["hidden_size"] // vals["num_attention_heads"]
    if g.get("mlp_bias") or g.get("attention_bias"):
        raise CheckpointError(
            f"{where}: attention_bias / mlp_bias are not supported (no released Higgs uses them)"
        )
    if g.get("hidden_act", "silu") != "silu":
        raise CheckpointError(f"{where}: hidden_act {g.get('hidden_act')!r} is not supported (silu)")
    cfg = HiggsConfig(
        **vals,
        head_dim=int(head_dim),
        rms_norm_eps=float(g["rms_norm_eps"]),
        rope=parse_rope(d, where, V2_ROPE if "rope_parameters" not in d else {}),
        tie_word_embeddings=bool(g.get("tie_word_embeddings", False)),
    )
    check(cfg, where)
    return cfg


def check(cfg: HiggsConfig, where: str) -> None:
    if cfg.num_attention_heads % cfg.num_key_value_heads:
        raise CheckpointError(
            f"{where}: num_attention_heads {cfg.num_attention_heads} must be a multiple of "
            f"num_key_value_heads {cfg.num_key_value_heads}"
        )
    if (
        cfg.audio_stream_eos_id != cfg.audio_stream_bos_id + 1
        or cfg.codebook_size != cfg.audio_stream_eos_id + 1
    ):
        raise CheckpointError(
            f"{where}: codebook_size {cfg.codebook_size} must be the codes plus stream BOS/EOS "
            f"(audio_stream_bos_id {cfg.audio_stream_bos_id}, "
            f"audio_stream_eos_id {cfg.audio_stream_eos_id}); "
            "released checkpoints use 1026 = 1024 + 2"
        )
    for k in ("audio_token_id", "audio_bos_token_id", "audio_delay_token_id", "eos_token_id"):
        if not 0 <= getattr(cfg, k) < cfg.vocab_size:
            raise CheckpointError(
                f"{where}: {k} {getattr(cfg, k)} is outside the vocabulary of {cfg.vocab_size}"
            )


@dataclass(frozen=True)
class GenerationDefaults:
    """generation_config.json, with transformers' defaults for absent fields."""

    do_sample: bool = False
    temperature: float = 1.0
    top_k: int | None = 50
    top_p: float = 1.0
    max_new_tokens: int | None = None
    max_length: int = 20
    ras_win_len: int | None = None
    ras_win_max_num_repeat: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path) -> GenerationDefaults:
        from ..checkpoint import read_json

        if not path.exists():
            return cls()
        d = read_json(path)
        try:
            return cls(
                do_sample=bool(d.get("do_sample", False)),
                temperature=float(d.get("temperature", 1.0)),
                top_k=None if d.get("top_k", 50) is None else int(d.get("top_k", 50)),
                top_p=float(d.get("top_p", 1.0)),
                max_new_tokens=None if d.get("max_new_tokens") is None else int(d["max_new_tokens"]),
                max_length=int(d.get("max_length", 20)),
                ras_win_len=None if d.get("ras_win_len") is None else int(d["ras_win_len"]),
                ras_win_max_num_repeat=(
                    None if d.get("ras_win_max_num_repeat") is None else int(d["ras_win_max_num_repeat"])
                ),
            )
        except (TypeError, ValueError) as e:
            raise CheckpointError(f"{path}: invalid generation setting ({e})") from None
