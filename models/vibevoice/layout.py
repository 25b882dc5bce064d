"""The released transformers layout of vibevoice/VibeVoice-1.5B-hf written without transformers: the
config.json `VibeVoiceConfig.save_pretrained` writes (sub-configs in full, as transformers 5.24 saves
them), generation_config.json, the byte-level tokenizer and the tensor names and shapes of
`VibeVoiceForConditionalGeneration`'s state dict (this package's own modules on the meta device, plus the
acoustic encoder, which generation never runs but the release ships).

Sizes: "tiny" (the dimensions of hf_build.py's tiny, so both builders write the same names and shapes),
"bench" (a 4-layer 256-wide LM and a narrow codec at the release's 3,200-sample hop: the benchmark's
size) and "real" (VibeVoice-1.5B's published dimensions). Tiny and bench use byte-level ids (specials at
256..259); real uses Qwen2.5's vocabulary size and special ids.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from ..text_tokenizer import bytes_to_unicode
from .hf_build import SCHEDULER, SPECIALS
from .hf_build import SIZES as HF_SIZES

TRANSFORMERS_VERSION = "5.24.0"

# hf_build.py's tiny and real (one source for both builders: their checkpoints must have the same names and
# shapes), with what transformers fills in: the LM head tied except in the tiny (hf_build's docstring says
# why), and the codec's init settings at their defaults where hf_build leaves them unset.
CODEC_DEFAULTS = {"layer_scale_init_value": 1e-6, "initializer_range": 0.01}
SIZES: dict[str, dict[str, Any]] = {
    "tiny": dict(HF_SIZES["tiny"], codec={**CODEC_DEFAULTS, **HF_SIZES["tiny"]["codec"]}, tied=False),
    "bench": dict(
        text=dict(vocab_size=264, hidden_size=256, intermediate_size=704, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=8192),
        head=dict(num_hidden_layers=2, intermediate_size=768, frequency_embedding_size=256),
        codec=dict(num_filters=4, downsampling_ratios=[2, 2, 4, 5, 5, 8], depths=[1, 1, 1, 1, 1, 1, 1],
                   ffn_expansion=2, layer_scale_init_value=0.1, initializer_range=0.1),
        semantic_hidden=32,
        tied=True,
    ),
    "real": dict(HF_SIZES["real"], codec={**CODEC_DEFAULTS, **HF_SIZES["real"]["codec"]}, tied=True),
}


def special_ids(size: str) -> dict[str, int]:
    if size == "real":  # Qwen2.5's ids, as the released config names them
        return dict(zip(SPECIALS, (151643, 151652, 151653, 151654), strict=True))
    return {t: 256 + i for i, t in enumerate(SPECIALS)}


def _codec(s: dict[str, Any], hidden: int, model_type: str) -> dict[str, Any]:
    c = s["codec"]
    return {
        "channels": 1,
        "depths": list(c["depths"]),
        "downsampling_ratios": list(c["downsampling_ratios"]),
        "ffn_expansion": c["ffn_expansion"],
        "hidden_act": "gelu",
        "hidden_size": hidden,
        "initializer_range": c["initializer_range"],
        "kernel_size": 7,
        "layer_scale_init_value": c["layer_scale_init_value"],
        "model_type": model_type,
        "num_filters": c["num_filters"],
        "rms_norm_eps": 1e-05,
        "vae_std": 0.625,
    }


def config_dict(size: str, dtype: str = "float32") -> dict[str, Any]:
    """config.json as `VibeVoiceConfig.save_pretrained` (transformers 5.24) writes it for this size."""
    s, ids = SIZES[size], special_ids(size)
    t = s["text"]
    text = {
        "attention_dropout": 0.0,
        "bos_token_id": None,
        "eos_token_id": None,
        "hidden_act": "silu",
        "hidden_size": t["hidden_size"],
        "initializer_range": 0.02,
        "intermediate_size": t["intermediate_size"],
        "layer_types": ["full_attention"] * t["num_hidden_layers"],
        "max_position_embeddings": t["max_position_embeddings"],
        "max_window_layers": 28,
        "model_type": "qwen2",
        "num_attention_heads": t["num_attention_heads"],
        "num_hidden_layers": t["num_hidden_layers"],
        "num_key_value_heads": t["num_key_value_heads"],
        "pad_token_id": None,
        "rms_norm_eps": 1e-06,
        "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"},
        "sliding_window": None,
        "tie_word_embeddings": s["tied"],
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": t["vocab_size"],
    }
    head = {
        "diffusion_max_period": 10000,
        "frequency_embedding_size": s["head"]["frequency_embedding_size"],
        "hidden_act": "silu",
        "hidden_size": t["hidden_size"],
        "intermediate_size": s["head"]["intermediate_size"],
        "latent_size": 64,
        "mlp_bias": False,
        "model_type": "vibevoice_diffusion",
        "num_hidden_layers": s["head"]["num_hidden_layers"],
        "rms_norm_eps": 1e-05,
    }
    return {
        "architectures": ["VibeVoiceForConditionalGeneration"],
        "audio_bos_token_id": ids["<|vision_start|>"],
        "audio_config": _codec(s, 64, "vibevoice_acoustic_tokenizer"),
        "audio_eos_token_id": ids["<|vision_end|>"],
        "audio_token_id": ids["<|vision_pad|>"],
        "diffusion_head_config": head,
        "diffusion_loss_weight": 0.5,
        "dtype": dtype,
        "eos_token_id": ids["<|endoftext|>"],
        "model_type": "vibevoice",
        "pad_token_id": ids["<|endoftext|>"],
        "semantic_model_config": _codec(s, s["semantic_hidden"], "vibevoice_acoustic_tokenizer_encoder"),
        "text_config": text,
        "tie_word_embeddings": s["tied"],
        "transformers_version": TRANSFORMERS_VERSION,
        "vocab_size": t["vocab_size"],
    }


def generation_dict(cfg: dict[str, Any], max_new_tokens: int) -> dict[str, Any]:
    """generation_config.json: what `VibeVoiceGenerationMixin` reads (guidance 1.3, 10 DPM-Solver steps)."""
    return {
        "bos_token_id": cfg["audio_bos_token_id"],
        "do_sample": False,
        "eos_token_id": cfg["eos_token_id"],
        "guidance_scale": 1.3,
        "max_new_tokens": max_new_tokens,
        "noise_scheduler_class": "DPMSolverMultistepScheduler",
        "noise_scheduler_config": dict(SCHEDULER),
        "num_diffusion_steps": 10,
        "pad_token_id": cfg["pad_token_id"],
        "transformers_version": TRANSFORMERS_VERSION,
    }


def write_side_files(out: Path, cfg: dict[str, Any], max_new_tokens: int) -> None:
    """config.json, generation_config.json and the tokenizer (a byte-level BPE without merges: one token a
    byte, the four Qwen specials added; at real size the specials sit at Qwen2.5's ids, with the ids
    between left unused: the vocabulary is the model's, the tokenizer only reaches bytes and specials)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    (out / "generation_config.json").write_text(
        json.dumps(generation_dict(cfg, max_new_tokens), indent=2, sort_keys=True) + "\n")
    vocab = {ch: i for i, ch in enumerate(bytes_to_unicode().values())}
    first = cfg["eos_token_id"]
    if first > 256:  # reach Qwen2.5's special ids: fill the gap with unused reserved tokens
        vocab.update({f"<|reserved_{i}|>": i for i in range(256, first)})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    ids = {t: cfg[k] for t, k in zip(SPECIALS, ("eos_token_id", "audio_bos_token_id", "audio_eos_token_id",
                                                "audio_token_id"), strict=True)}
    gap = [f"<|reserved_{i}|>" for i in range(first, max(ids.values()) + 1) if i not in ids.values()]
    specials = sorted([*ids, *gap], key=lambda t: ids[t] if t in ids else _reserved_id(t))
    tok.add_special_tokens([AddedToken(t, special=t in ids, normalized=False) for t in specials])
    for t, i in ids.items():
        if tok.token_to_id(t) != i:
            raise RuntimeError(f"the tokenizer put {t} at {tok.token_to_id(t)}, the config says {i}")
    tok.save(str(out / "tokenizer.json"))
    conf = {"eos_token": "<|endoftext|>", "pad_token": "<|endoftext|>",
            "tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 65536}
    (out / "tokenizer_config.json").write_text(json.dumps(conf, indent=2))


def _reserved_id(name: str) -> int:
    return int(name.removeprefix("<|reserved_").removesuffix("|>"))


def tensor_shapes(cfg: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """name -> shape of every tensor the release stores (the tied LM head, when tied, is not stored)."""
    from .codec import Encoder
    from .config import parse_config
    from .weights import VibeVoiceWeights

    c = parse_config(cfg, "config.json")
    with torch.device("meta"):
        w = VibeVoiceWeights(c, own_lm_head=not c.text.tie_word_embeddings)
        acoustic_encoder = Encoder(c.acoustic)
    shapes = {k: tuple(v.shape) for k, v in w.state_dict().items()}
    shapes.update({f"model.audio_tower.encoder.{k}": tuple(v.shape)
                   for k, v in acoustic_encoder.state_dict().items()})
    return dict(sorted(shapes.items()))
