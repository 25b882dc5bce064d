"""Typed views of a Qwen3-TTS checkpoint's config.json and generation_config.json.

Only the fields the talker and code predictor need are typed; the raw dicts are kept so a builder can
write them back unchanged. Defaults follow the official configuration classes, so a config.json that
omits a field means the same thing here as in the reference package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..base import CheckpointError


@dataclass(frozen=True)
class BlockConfig:
    """One Qwen3 decoder stack (talker or code predictor)."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 1e6
    attention_bias: bool = False
    hidden_act: str = "silu"
    max_position_embeddings: int = 32768


@dataclass(frozen=True)
class PredictorConfig:
    block: BlockConfig
    vocab_size: int  # codebook size (2048 real)
    num_code_groups: int


@dataclass(frozen=True)
class TalkerConfig:
    block: BlockConfig
    vocab_size: int  # codec vocab incl. control ids (3072 real)
    text_vocab_size: int
    text_hidden_size: int
    num_code_groups: int
    codec_pad_id: int
    codec_bos_id: int
    codec_eos_id: int
    codec_think_id: int
    codec_nothink_id: int
    codec_think_bos_id: int
    codec_think_eos_id: int
    language_ids: dict[str, int]
    speaker_ids: dict[str, int]
    speaker_dialect: dict[str, str | bool]
    predictor: PredictorConfig


@dataclass(frozen=True)
class Qwen3TTSConfig:
    talker: TalkerConfig
    model_type: str  # "custom_voice" | "base" | "voice_design"
    model_size: str  # tts_model_size, e.g. "0b6" / "1b7"
    tts_pad_id: int
    tts_bos_id: int
    tts_eos_id: int
    speaker_encoder: dict[str, Any] | None
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    @property
    def supports_instructions(self) -> bool:
        # The reference wrapper drops instructions for CustomVoice when `tts_model_size in "0b6"`
        # (a substring test). We refuse instead of silently dropping, so mirror the same test.
        if self.model_type == "voice_design":
            return True
        if self.model_type == "custom_voice":
            return self.model_size not in "0b6"
        return False

    @property
    def languages(self) -> tuple[str, ...]:
        """User-selectable languages: "auto" plus every non-dialect language id."""
        return ("auto", *sorted(k for k in self.talker.language_ids if "dialect" not in k))


@dataclass(frozen=True)
class GenerationDefaults:
    do_sample: bool = True
    temperature: float = 0.9
    top_k: int = 50
    top_p: float = 1.0
    repetition_penalty: float = 1.05
    subtalker_dosample: bool = True
    subtalker_temperature: float = 0.9
    subtalker_top_k: int = 50
    subtalker_top_p: float = 1.0
    max_new_tokens: int = 2048

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GenerationDefaults:
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in known and v is not None})


def _block(d: dict[str, Any], default_theta: float) -> BlockConfig:
    heads = int(d.get("num_attention_heads", 16))
    hidden = int(d["hidden_size"])
    return BlockConfig(
        hidden_size=hidden,
        intermediate_size=int(d["intermediate_size"]),
        num_hidden_layers=int(d["num_hidden_layers"]),
        num_attention_heads=heads,
        num_key_value_heads=int(d.get("num_key_value_heads") or heads),
        head_dim=int(d.get("head_dim") or hidden // heads),
        rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),
        rope_theta=float(d.get("rope_theta", default_theta)),
        attention_bias=bool(d.get("attention_bias", False)),
        hidden_act=str(d.get("hidden_act", "silu")),
        max_position_embeddings=int(d.get("max_position_embeddings", 32768)),
    )


def parse_config(d: dict[str, Any], where: str = "config.json") -> Qwen3TTSConfig:
    """Parse a config.json dict; raise CheckpointError naming the missing field and file."""
    try:
        t = d["talker_config"]
        p = t["code_predictor_config"]
        predictor = PredictorConfig(
            block=_block(p, 10000.0),
            vocab_size=int(p.get("vocab_size", 2048)),
            num_code_groups=int(p.get("num_code_groups", 16)),
        )
        talker = TalkerConfig(
            block=_block(t, 10000.0),
            vocab_size=int(t.get("vocab_size", 3072)),
            text_vocab_size=int(t.get("text_vocab_size", 151936)),
            text_hidden_size=int(t.get("text_hidden_size", 2048)),
            num_code_groups=int(t.get("num_code_groups", 16)),
            codec_pad_id=int(t["codec_pad_id"]),
            codec_bos_id=int(t["codec_bos_id"]),
            codec_eos_id=int(t["codec_eos_token_id"]),
            codec_think_id=int(t["codec_think_id"]),
            codec_nothink_id=int(t["codec_nothink_id"]),
            codec_think_bos_id=int(t["codec_think_bos_id"]),
            codec_think_eos_id=int(t["codec_think_eos_id"]),
            language_ids={k.lower(): int(v) for k, v in (t.get("codec_language_id") or {}).items()},
            speaker_ids={k.lower(): int(v) for k, v in (t.get("spk_id") or {}).items()},
            speaker_dialect={k.lower(): v for k, v in (t.get("spk_is_dialect") or {}).items()},
            predictor=predictor,
        )
        return Qwen3TTSConfig(
            talker=talker,
            model_type=str(d.get("tts_model_type") or "custom_voice"),
            model_size=str(d.get("tts_model_size") or ""),
            tts_pad_id=int(d.get("tts_pad_token_id", 151671)),
            tts_bos_id=int(d.get("tts_bos_token_id", 151672)),
            tts_eos_id=int(d.get("tts_eos_token_id", 151673)),
            speaker_encoder=d.get("speaker_encoder_config"),
            raw=d,
        )
    except KeyError as e:
        raise CheckpointError(
            f"{where} has no field {e.args[0]!r}; is this a Qwen3-TTS 12 Hz checkpoint?"
        ) from None
