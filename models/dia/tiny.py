"""Deterministic random-weight Dia checkpoints in the transformers layout, written WITHOUT transformers:

    OUT/config.json             DiaConfig.to_dict() shape (model_type "dia", encoder_config/decoder_config)
    OUT/generation_config.json  sampling defaults like the hub checkpoint (CFG 3, temperature 1.8, ...)
    OUT/model.safetensors       `model.encoder.*`, `model.decoder.*`, `logits_dense.weight`
    OUT/tokenizer_config.json, preprocessor_config.json   (DiaTokenizer / DiaFeatureExtractor settings)
    OUT/codec/                  a tiny DAC (models/codecs/dac/tiny.py: DacModel.save_pretrained layout)

transformers loads OUT with no missing or unexpected keys (tests/test_dia_parity.py checks it).
Weights: one torch.Generator(seed), N(0, 0.02) like transformers' initialiser, norms at 1. The audio
is not speech; `max_length` in the generation config bounds how long a request runs (random weights
rarely pick EOS).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from .config import parse_config
from .layers import DiaWeights

SEED = 1234
SIZES: dict[str, dict[str, dict[str, Any]]] = {
    # the oracle tests' shapes: cross K/V of a token = 3 self-KV positions (2 heads x 12 vs 1 x 8)
    "tiny": {
        "encoder": dict(
            max_position_embeddings=128,
            num_hidden_layers=2,
            hidden_size=32,
            num_attention_heads=4,
            num_key_value_heads=4,
            head_dim=8,
            intermediate_size=64,
            vocab_size=256,
        ),
        "decoder": dict(
            max_position_embeddings=256,
            num_hidden_layers=2,
            hidden_size=48,
            intermediate_size=96,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=8,
            cross_num_attention_heads=4,
            cross_head_dim=12,
            cross_num_key_value_heads=2,
            cross_hidden_size=32,
            vocab_size=1028,
            num_channels=9,
        ),
    },
    # a moderate model for CPU serving benchmarks (same ratios as Dia-1.6B: GQA 4:1, cross 4x self)
    "bench": {
        "encoder": dict(
            max_position_embeddings=1024,
            num_hidden_layers=2,
            hidden_size=128,
            num_attention_heads=4,
            num_key_value_heads=4,
            head_dim=32,
            intermediate_size=256,
            vocab_size=256,
        ),
        "decoder": dict(
            max_position_embeddings=3072,
            num_hidden_layers=4,
            hidden_size=256,
            intermediate_size=512,
            num_attention_heads=8,
            num_key_value_heads=2,
            head_dim=32,
            cross_num_attention_heads=8,
            cross_head_dim=32,
            cross_num_key_value_heads=8,
            cross_hidden_size=128,
            vocab_size=1028,
            num_channels=9,
        ),
    },
}
GENERATION = {
    "bos_token_id": 1026,
    "eos_token_id": 1024,
    "pad_token_id": 1025,
    "do_sample": True,
    "guidance_scale": 3.0,
    "temperature": 1.8,
    "top_k": 50,
    "top_p": 0.9,
}


def make_config(size: str) -> dict[str, Any]:
    s = SIZES[size]
    enc = dict(
        s["encoder"],
        model_type="dia_encoder",
        hidden_act="silu",
        norm_eps=1e-5,
        rope_theta=10000.0,
        rope_scaling=None,
        initializer_range=0.02,
    )
    dec = dict(
        s["decoder"],
        model_type="dia_decoder",
        hidden_act="silu",
        norm_eps=1e-5,
        rope_theta=10000.0,
        rope_scaling=None,
        initializer_range=0.02,
        use_cache=True,
    )
    return {
        "architectures": ["DiaForConditionalGeneration"],
        "model_type": "dia",
        "encoder_config": enc,
        "decoder_config": dec,
        "delay_pattern": [0, 8, 9, 10, 11, 12, 13, 14, 15],
        "bos_token_id": 1026,
        "eos_token_id": 1024,
        "pad_token_id": 1025,
        "is_encoder_decoder": True,
        "norm_eps": 1e-5,
        "initializer_range": 0.02,
        "use_cache": True,
        "dtype": "float32",
    }


def build_tiny(
    out: str | Path, size: str = "tiny", seed: int = SEED, max_length: int = 3072, codec: bool = True
) -> Path:
    """Write a deterministic random checkpoint to `out` (built in a temp dir, then moved into place)."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".building-", dir=out.parent))
    try:
        cfg_dict = make_config(size)
        (tmp / "config.json").write_text(json.dumps(cfg_dict, indent=2, sort_keys=True))
        gen = dict(GENERATION, max_length=max_length)
        (tmp / "generation_config.json").write_text(json.dumps(gen, indent=2, sort_keys=True))
        (tmp / "tokenizer_config.json").write_text(
            json.dumps(
                {
                    "tokenizer_class": "DiaTokenizer",
                    "pad_token": "<pad>",
                    "unk_token": "<pad>",
                    "max_length": 1024,
                    "offset": 0,
                    "model_max_length": 1024,
                },
                indent=2,
            )
        )
        (tmp / "preprocessor_config.json").write_text(
            json.dumps(
                {
                    "feature_extractor_type": "DiaFeatureExtractor",
                    "feature_size": 1,
                    "sampling_rate": 44100,
                    "hop_length": 512,
                    "padding_value": 0.0,
                    "padding_side": "right",
                    "return_attention_mask": True,
                },
                indent=2,
            )
        )
        cfg = parse_config(cfg_dict, "tiny")
        g = torch.Generator().manual_seed(seed)
        weights = DiaWeights(cfg)
        sd = {}
        for k, v in weights.state_dict().items():
            if k.endswith("norm.weight"):
                sd[k] = torch.ones_like(v)
            else:
                sd[k] = (torch.randn(v.shape, generator=g) * 0.02).contiguous()
        save_file(sd, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        if codec:
            from ..codecs.dac.tiny import build_tiny_dac

            build_tiny_dac(tmp / "codec", seed=seed)
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
