"""Typed views of a Qwen3-TTS checkpoint's config.json and generation_config.json.

Only the fields the talker and code predictor need are typed; the raw dicts are kept so a builder can
write them back unchanged. Defaults follow the official configuration classes, so a config.json that
omits a field means the same thing here as in the reference package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..base import CheckpointError
from ..config_fields import MISSING, get_dict, get_float, get_int, rope_theta
from ..layers.config import BlockConfig


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
    def from_dict(cls, d: dict[str, Any], where: str = "generation_config.json") -> GenerationDefaults:
        """Absent or null -> the official default; a value of the wrong kind -> CheckpointError naming the
        key and the file."""
        values: dict[str, Any] = {}
        for name, f in cls.__dataclass_fields__.items():
            if f.type == "bool":
                values[name] = bool(d[name]) if d.get(name) is not None else f.default
            elif f.type == "float":
                values[name] = get_float(d, name, f.default, where)
            else:
                values[name] = get_int(d, name, f.default, where)
        return cls(**values)


# Qwen3-TTS's talker writes multimodal RoPE keys; its three position axes are always equal, so it is plain
# 1-D RoPE (design notes) and these keys leave it plain.
MROPE_KEYS = ("mrope_section", "interleaved")


def _block(d: dict[str, Any], default_theta: float, where: str) -> BlockConfig:
    heads = get_int(d, "num_attention_heads", 16, where)
    hidden = get_int(d, "hidden_size", MISSING, where)
    if heads < 1:
        raise CheckpointError(f"{where}: num_attention_heads is {heads}, expected at least 1")
    act = d.get("hidden_act") or "silu"
    return BlockConfig(
        hidden_size=hidden,
        intermediate_size=get_int(d, "intermediate_size", MISSING, where),
        num_hidden_layers=get_int(d, "num_hidden_layers", MISSING, where),
        num_attention_heads=heads,
        num_key_value_heads=get_int(d, "num_key_value_heads", heads, where),
        head_dim=get_int(d, "head_dim", hidden // heads, where),
        rms_norm_eps=get_float(d, "rms_norm_eps", 1e-6, where),
        rope_theta=rope_theta(d, default_theta, where, allowed_extra=MROPE_KEYS),
        attention_bias=bool(d.get("attention_bias") or False),
        hidden_act=act if isinstance(act, str) else str(act),
        max_position_embeddings=get_int(d, "max_position_embeddings", 32768, where),
    )


def _ids(d: Any, where: str) -> dict[str, int]:
    """A name -> id table (spk_id, codec_language_id); absent or null -> empty."""
    if d is None:
        return {}
    if not isinstance(d, dict):
        raise CheckpointError(f"{where} is {d!r}, expected an object of name: id")
    return {str(k).lower(): get_int(d, k, MISSING, where) for k in d}


def parse_config(d: dict[str, Any], where: str = "config.json") -> Qwen3TTSConfig:
    """Parse a config.json dict as transformers 4.5x or 5.x writes it; raise CheckpointError naming the
    field and file for anything missing or of the wrong kind."""
    try:
        return _parse(d, where)
    except CheckpointError as e:
        raise CheckpointError(f"{e}; is this a Qwen3-TTS 12 Hz checkpoint?") from None


def _parse(d: dict[str, Any], where: str) -> Qwen3TTSConfig:
    t = get_dict(d, "talker_config", where, required=True)
    tw = f"{where} talker_config"
    p = get_dict(t, "code_predictor_config", tw, required=True)
    pw = f"{tw}.code_predictor_config"
    predictor = PredictorConfig(
        block=_block(p, 10000.0, pw),
        vocab_size=get_int(p, "vocab_size", 2048, pw),
        num_code_groups=get_int(p, "num_code_groups", 16, pw),
    )
    talker = TalkerConfig(
        block=_block(t, 10000.0, tw),
        vocab_size=get_int(t, "vocab_size", 3072, tw),
        text_vocab_size=get_int(t, "text_vocab_size", 151936, tw),
        text_hidden_size=get_int(t, "text_hidden_size", 2048, tw),
        num_code_groups=get_int(t, "num_code_groups", 16, tw),
        codec_pad_id=get_int(t, "codec_pad_id", MISSING, tw),
        codec_bos_id=get_int(t, "codec_bos_id", MISSING, tw),
        codec_eos_id=get_int(t, "codec_eos_token_id", MISSING, tw),
        codec_think_id=get_int(t, "codec_think_id", MISSING, tw),
        codec_nothink_id=get_int(t, "codec_nothink_id", MISSING, tw),
        codec_think_bos_id=get_int(t, "codec_think_bos_id", MISSING, tw),
        codec_think_eos_id=get_int(t, "codec_think_eos_id", MISSING, tw),
        language_ids=_ids(t.get("codec_language_id"), f"{tw}.codec_language_id"),
        speaker_ids=_ids(t.get("spk_id"), f"{tw}.spk_id"),
        speaker_dialect={str(k).lower(): v for k, v in get_dict(t, "spk_is_dialect", tw).items()},
        predictor=predictor,
    )
    speaker_encoder = d.get("speaker_encoder_config")
    if speaker_encoder is not None and not isinstance(speaker_encoder, dict):
        raise CheckpointError(f"{where}: speaker_encoder_config is {speaker_encoder!r}, expected an object")
    return Qwen3TTSConfig(
        talker=talker,
        model_type=str(d.get("tts_model_type") or "custom_voice"),
        model_size=str(d.get("tts_model_size") or ""),
        tts_pad_id=get_int(d, "tts_pad_token_id", 151671, where),
        tts_bos_id=get_int(d, "tts_bos_token_id", 151672, where),
        tts_eos_id=get_int(d, "tts_eos_token_id", 151673, where),
        speaker_encoder=speaker_encoder,
        raw=d,
    )
