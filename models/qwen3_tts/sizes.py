"""config.json dicts of the real Qwen3-TTS 12 Hz architectures (0.6B and 1.7B), for meta-device checks
and cost models. Values from the design notes (section 2); ids are the real special ids."""

from __future__ import annotations

from typing import Any

SPEAKERS = {
    "serena": 3066,
    "vivian": 3065,
    "uncle_fu": 3010,
    "ryan": 3061,
    "aiden": 2861,
    "ono_anna": 2873,
    "sohee": 2864,
    "eric": 2875,
    "dylan": 2878,
}
DIALECT = {"eric": "sichuan_dialect", "dylan": "beijing_dialect"}
LANGUAGES = {
    "english": 2050,
    "german": 2053,
    "spanish": 2054,
    "chinese": 2055,
    "japanese": 2058,
    "french": 2061,
    "sichuan_dialect": 2062,
    "korean": 2064,
    "russian": 2069,
    "italian": 2070,
    "portuguese": 2071,
    "beijing_dialect": 2074,
}


def real_config(size: str = "0.6B", variant: str = "custom_voice") -> dict[str, Any]:
    if size not in ("0.6B", "1.7B"):
        raise ValueError(f"size must be 0.6B or 1.7B, got {size!r}")
    hidden, inter = (1024, 3072) if size == "0.6B" else (2048, 6144)
    talker = dict(
        vocab_size=3072,
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        hidden_act="silu",
        max_position_embeddings=32768,
        rms_norm_eps=1e-6,
        rope_theta=1000000.0,
        rope_scaling={"mrope_section": [24, 20, 20], "interleaved": True, "rope_type": "default"},
        num_code_groups=16,
        text_hidden_size=2048,
        text_vocab_size=151936,
        position_id_per_seconds=13,
        codec_pad_id=2148,
        codec_bos_id=2149,
        codec_eos_token_id=2150,
        codec_think_id=2154,
        codec_nothink_id=2155,
        codec_think_bos_id=2156,
        codec_think_eos_id=2157,
        codec_language_id=dict(LANGUAGES),
        spk_id=dict(SPEAKERS) if variant == "custom_voice" else {},
        spk_is_dialect={k: DIALECT.get(k, False) for k in SPEAKERS} if variant == "custom_voice" else {},
        code_predictor_config=dict(
            vocab_size=2048,
            hidden_size=1024,
            intermediate_size=3072,
            num_hidden_layers=5,
            num_attention_heads=16,
            num_key_value_heads=8,
            head_dim=128,
            hidden_act="silu",
            max_position_embeddings=65536,
            rms_norm_eps=1e-6,
            rope_theta=1000000.0,
            num_code_groups=16,
        ),
    )
    cfg: dict[str, Any] = dict(
        architectures=["Qwen3TTSForConditionalGeneration"],
        model_type="qwen3_tts",
        tokenizer_type="qwen3_tts_tokenizer_12hz",
        tts_model_size="0b6" if size == "0.6B" else "1b7",
        tts_model_type=variant,
        im_start_token_id=151644,
        im_end_token_id=151645,
        tts_pad_token_id=151671,
        tts_bos_token_id=151672,
        tts_eos_token_id=151673,
        talker_config=talker,
    )
    if variant == "base":
        cfg["speaker_encoder_config"] = {"enc_dim": hidden, "sample_rate": 24000}
    return cfg
