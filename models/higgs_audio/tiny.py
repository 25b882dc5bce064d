"""Random-weight Higgs Audio v2 checkpoints in the transformers layout, built without transformers (the demo,
tests, and `scripts/make_tiny.py --family higgs`).

Written: config.json (`higgs_audio_v2`, codebook_size 1026), generation_config.json, model.safetensors with
every tensor `HiggsAudioV2ForConditionalGeneration` has, tokenizer.json (byte-level BPE over the 256 bytes
plus the Llama-3 / Higgs special tokens) + tokenizer_config.json, and audio_tokenizer/ (config.json + the
decoder's tensors in `HiggsAudioV2TokenizerModel` names: quantizer codebooks, project_out, fc2,
acoustic_decoder).

Random weights: the stream BOS/EOS rows of audio_lm_head are zero, so a random code (the max of 1024 random
logits) always beats them: the demo never ends early and never emits a stray BOS; `max_new_tokens` bounds it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from ..byte_tokenizer import write_tokenizer
from ..codecs.xcodec.encoder import HiggsEncoderConfig
from ..weights import save_weights
from .codec import HiggsCodecConfig, HiggsDecoderNet
from .config import HiggsConfig, parse_v2
from .encoder import POS_CONV, HiggsEncoderNet
from .layers import HiggsWeights

SPECIALS = (
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
    "<|scene_desc_start|>",
    "<|scene_desc_end|>",
    "<|audio_out_bos|>",
    "<|AUDIO_OUT|>",
    "<|audio_eos|>",
    "<|reserved_special_token_6|>",
    "<|audio_bos|>",
    "<|AUDIO|>",
)

SIZES: dict[str, dict[str, Any]] = {
    "tiny": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=2048,
    ),
    # a CPU benchmark size (`python -m benchmarks bench_higgs`): big enough that the backbone is the work
    "bench": dict(
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=4,
        head_dim=32,
        max_position_embeddings=2048,
    ),
    # Higgs Audio v2 3B (Llama-3.2-3B backbone): transformers' HiggsAudioV2Config defaults.
    "v2-3b": dict(
        hidden_size=3072,
        intermediate_size=8192,
        num_hidden_layers=28,
        num_attention_heads=24,
        num_key_value_heads=8,
        head_dim=128,
        max_position_embeddings=2048,
    ),
}
CODEC_SIZES: dict[str, dict[str, Any]] = {
    "tiny": dict(decoder_hidden_size=32, acoustic_hidden=16, semantic_hidden=16, codebook_dim=8),
    "bench": dict(decoder_hidden_size=32, acoustic_hidden=16, semantic_hidden=16, codebook_dim=8),
    # bosonai/higgs-audio-v2-tokenizer: DAC decoder 1024 wide over a 256-wide latent, HuBERT-base 768.
    "v2-3b": dict(decoder_hidden_size=1024, acoustic_hidden=256, semantic_hidden=768, codebook_dim=64),
}
RATIOS = [8, 5, 4, 2, 3]  # the released tokenizer's: hop 960 at 24 kHz = 25 frames/s


def model_config(size: str, ids: dict[str, int]) -> dict[str, Any]:
    vocab = 256 + len(SPECIALS) + 3 if size in ("tiny", "bench") else 128256
    return {
        "architectures": ["HiggsAudioV2ForConditionalGeneration"],
        "model_type": "higgs_audio_v2",
        **SIZES[size],
        "vocab_size": vocab,
        "rms_norm_eps": 1e-5,
        "num_codebooks": 8,
        "codebook_size": 1026,
        "audio_stream_bos_id": 1024,
        "audio_stream_eos_id": 1025,
        "audio_token_id": ids["<|AUDIO_OUT|>"],
        "audio_bos_token_id": ids["<|audio_out_bos|>"],
        "audio_delay_token_id": ids["<|reserved_special_token_6|>"],
        "bos_token_id": ids["<|begin_of_text|>"],
        "eos_token_id": ids["<|eot_id|>"],
        "pad_token_id": ids["<|eot_id|>"],
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "rope_parameters": {
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 32.0,
            "high_freq_factor": 0.5,
            "low_freq_factor": 0.125,
            "original_max_position_embeddings": 1024,
        },
    }


def codec_config(size: str) -> dict[str, Any]:
    c = CODEC_SIZES[size]
    return {
        "architectures": ["HiggsAudioV2TokenizerModel"],
        "model_type": "higgs_audio_v2_tokenizer",
        "sample_rate": 24000,
        "target_bandwidths": [0.5, 1, 1.5, 2],
        "codebook_size": 1024,
        "codebook_dim": c["codebook_dim"],
        "kernel_size": 3,
        "channel_ratios": [1, 1],
        "strides": [1, 1],
        "block_dilations": [1, 1],
        "unit_kernel_size": 3,
        "semantic_sample_rate": 16000,
        "downsample_factor": 320,
        "acoustic_model_config": {
            "model_type": "dac",
            "encoder_hidden_size": 4 if size in ("tiny", "bench") else 64,
            "downsampling_ratios": RATIOS,
            "upsampling_ratios": RATIOS,
            "decoder_hidden_size": c["decoder_hidden_size"],
            "hidden_size": c["acoustic_hidden"],
            "sampling_rate": 24000,
        },
        "semantic_model_config": {
            "model_type": "hubert",
            "hidden_size": c["semantic_hidden"],
            **(
                {
                    "num_hidden_layers": 1,
                    "num_attention_heads": 2,
                    "intermediate_size": 2 * c["semantic_hidden"],
                    "conv_dim": [8] * 7,
                    "num_conv_pos_embeddings": 16,
                    "num_conv_pos_embedding_groups": 2,
                }
                if size in ("tiny", "bench")
                else {}
            ),
        },
    }


def _randomise(module: torch.nn.Module, gen: torch.Generator) -> None:
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith("alpha"):
                p.copy_(0.5 + torch.rand(p.shape, generator=gen))
            elif p.dim() == 1 and ("norm" in name):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif p.dim() == 1:
                p.copy_(0.02 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = p[0].numel() if p.dim() > 1 else 1
                std = 0.02 if "embed" in name or "lm_head" in name else (1.0 / fan_in) ** 0.5
                p.copy_(std * torch.randn(p.shape, generator=gen))


def build_tiny(
    out: Path, size: str = "tiny", seed: int = 0, max_new_tokens: int = 300, output_std: float = 0.1
) -> Path:
    """Write a complete random checkpoint (model + tokenizer + audio tokenizer) into `out`."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    ids = write_tokenizer(out, SPECIALS)
    d = model_config(size, ids)
    (out / "config.json").write_text(json.dumps(d, indent=2))
    cfg: HiggsConfig = parse_v2(d, str(out / "config.json"))
    (out / "generation_config.json").write_text(
        json.dumps(
            {
                "bos_token_id": d["bos_token_id"],
                "eos_token_id": d["eos_token_id"],
                "pad_token_id": d["pad_token_id"],
                "do_sample": False,
                "max_new_tokens": max_new_tokens,
            },
            indent=2,
        )
    )
    weights = HiggsWeights(cfg)
    _randomise(weights, gen)
    with torch.no_grad():
        weights.audio_lm_head.weight.view(8, 1026, -1)[:, 1024:] = 0.0
    save_weights(weights.state_dict(), out)
    (out / "processor_config.json").write_text(
        json.dumps(
            {
                "processor_class": "HiggsAudioV2Processor",
                "audio_token": "<|AUDIO_OUT|>",
                "audio_bos_token": "<|audio_out_bos|>",
                "audio_eos_token": "<|audio_eos|>",
                "audio_delay_token": "<|reserved_special_token_6|>",
                "audio_stream_bos_id": 1024,
                "audio_stream_eos_id": 1025,
            },
            indent=2,
        )
    )
    write_codec(out / "audio_tokenizer", size, gen, output_std)
    return out


def write_codec(
    out: Path, size: str, gen: torch.Generator, output_std: float = 0.1, encoder: bool = True
) -> None:
    """The audio tokenizer with random weights: the decode half, its output conv scaled so that random codes
    decode to PCM of standard deviation `output_std` (a plausible level, no clipping in a 16-bit WAV), and
    (`encoder`) the encode half (DAC encoder, semantic encoder, HuBERT, fc, the quantizers' project_in)
    sharing the decoder's codebooks, drawn after the decoder so the decode half does not depend on it."""
    out.mkdir(parents=True, exist_ok=True)
    d = codec_config(size)
    (out / "config.json").write_text(json.dumps(d, indent=2))
    net = HiggsDecoderNet(HiggsCodecConfig.read(out / "config.json"))
    _randomise(net, gen)
    with torch.no_grad():
        for vq in net.quantizer.quantizers:
            vq.codebook.embed.copy_(torch.randn(vq.codebook.embed.shape, generator=gen))
        probe = torch.randint(0, 1024, (1, net.cfg.n_codebooks, 20), generator=gen)
        std = float(net.acoustic_decoder(net.latents(probe)).std())
        net.acoustic_decoder.conv2.weight.mul_(output_std / std)
        net.acoustic_decoder.conv2.bias.mul_(output_std / std)
    sd = {k: v.contiguous() for k, v in net.state_dict().items()}
    if encoder:
        sd.update(encoder_state(HiggsEncoderConfig.read(out / "config.json"), sd, gen))
    save_file(sd, str(out / "model.safetensors"), metadata={"format": "pt"})


def encoder_state(cfg: HiggsEncoderConfig, decoder: dict[str, torch.Tensor], gen: torch.Generator) -> dict:
    """Random encode-half tensors in the transformers layout; the codebooks and project_out are the
    decoder's (one quantizer in the checkpoint), HuBERT's positional conv as its weight-norm pair."""
    enc = HiggsEncoderNet(cfg)
    _randomise(enc, gen)
    sd = {k: v.contiguous() for k, v in enc.state_dict().items() if k not in decoder}
    v = sd.pop(POS_CONV)
    g = v.norm(dim=(0, 1), keepdim=True) * (1.0 + 0.1 * torch.rand(v.shape[2], generator=gen).to(v.dtype))
    base = POS_CONV[: -len("weight")]
    sd[base + "parametrizations.weight.original0"] = g.contiguous()
    sd[base + "parametrizations.weight.original1"] = v
    return sd


def build_tiny_boson(out: Path, hf_dir: Path) -> Path:
    """The same random model as the transformers-layout checkpoint `hf_dir`, written in the original
    release's layout (`model_type` "higgs_audio", layouts.py): `text_config`, the DualFFN adapter on every
    layer, the partially-frozen embedding / head pairs split at an arbitrary row. Tokenizer and audio
    tokenizer copied."""
    import shutil

    from safetensors.torch import load_file

    out, hf_dir = Path(out), Path(hf_dir)
    out.mkdir(parents=True, exist_ok=True)
    d = json.loads((hf_dir / "config.json").read_text())
    text = {
        k: d[k]
        for k in (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "max_position_embeddings",
            "rms_norm_eps",
            "bos_token_id",
            "eos_token_id",
            "pad_token_id",
        )
    }
    rope = dict(d["rope_parameters"])
    text.update(model_type="llama", rope_theta=rope.pop("rope_theta"), rope_scaling=rope)
    conf = {
        "architectures": ["HiggsAudioModel"],
        "model_type": "higgs_audio",
        "text_config": text,
        "audio_adapter_type": "dual_ffn_fast_forward",
        "audio_dual_ffn_layers": list(range(d["num_hidden_layers"])),
        "use_delay_pattern": True,
        "skip_audio_tower": True,
        "audio_num_codebooks": d["num_codebooks"],
        "audio_codebook_size": d["codebook_size"] - 2,
        "audio_stream_bos_id": d["audio_stream_bos_id"],
        "audio_stream_eos_id": d["audio_stream_eos_id"],
        "audio_out_token_idx": d["audio_token_id"],
        "audio_out_bos_token_id": d["audio_bos_token_id"],
        "audio_decoder_proj_num_layers": 0,
    }
    (out / "config.json").write_text(json.dumps(conf, indent=2))
    sd = load_file(str(hf_dir / "model.safetensors"))
    emb, head = sd["model.embed_tokens.weight"], sd["audio_lm_head.weight"]
    boson = {
        "embed_tokens.embedding_frozen.weight": emb[:200].clone(),
        "embed_tokens.embedding_trainable.weight": emb[200:].clone(),
        "audio_decoder_proj.audio_lm_head.linear_frozen.weight": head[:5000].clone(),
        "audio_decoder_proj.audio_lm_head.linear_trainable.weight": head[5000:].clone(),
        "audio_decoder_proj.text_lm_head.weight": torch.zeros(d["vocab_size"], d["hidden_size"]),
        "audio_codebook_embeddings.weight": sd["model.embed_audio_tokens.embed_audio_tokens.weight"],
    }
    for k, v in sd.items():
        if k.startswith(("model.layers.", "model.norm.")):
            boson[k[len("model.") :]] = v
    save_file(boson, str(out / "model.safetensors"), metadata={"format": "pt"})
    for name in (
        "tokenizer.json",
        "tokenizer_config.json",
        "generation_config.json",
        "processor_config.json",
    ):
        shutil.copy(hf_dir / name, out / name)
    shutil.copytree(hf_dir / "audio_tokenizer", out / "audio_tokenizer", dirs_exist_ok=True)
    return out


V3_SPECIALS = (
    "<|tts|>",
    "<|ref_audio|>",
    "<|ref_text|>",
    "<|text|>",
    "<|text_end|>",
    "<|audio|>",
    "<|audio_end|>",
    "<|eoc|>",
)
V3_SIZES: dict[str, dict[str, Any]] = {
    "tiny": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
    ),
    # bosonai/higgs-audio-v3-tts-4b: Qwen3-4B (36 layers, 2560 wide, 32 / 8 heads of 128, MLP 9728).
    "v3-4b": dict(
        hidden_size=2560,
        intermediate_size=9728,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        head_dim=128,
    ),
}


def build_tiny_v3(out: Path, size: str = "tiny", seed: int = 0, max_new_tokens: int = 300) -> Path:
    """A random Higgs Audio v3 checkpoint in its real key layout (layouts.py): a Qwen3 backbone under `body.`,
    the tied fused 8 x 1026 audio embedding / head, the audio tokenizer's decoder bundled under
    `tied.embedding.modality_embeddings.0.model.`, a byte-level tokenizer with the v3 special tokens."""
    from .layouts import V3_CODEC_PREFIX, V3_EMBED, parse_v3

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(seed)
    write_tokenizer(out, V3_SPECIALS)
    text = {
        "model_type": "qwen3",
        **V3_SIZES[size],
        "vocab_size": 256 + len(V3_SPECIALS) if size == "tiny" else 151936,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 40960,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "attention_bias": False,
    }
    conf = {
        "architectures": ["HiggsMultimodalQwen3ForConditionalGeneration"],
        "model_type": "higgs_multimodal_qwen3",
        "text_config": text,
        "audio_encoder_config": {"tie_word_embeddings": True},
    }
    (out / "config.json").write_text(json.dumps(conf, indent=2))
    (out / "generation_config.json").write_text(
        json.dumps(
            {"do_sample": True, "temperature": 0.8, "top_k": 50, "max_new_tokens": max_new_tokens}, indent=2
        )
    )
    cfg = parse_v3(conf, {V3_EMBED: (8 * 1026, text["hidden_size"])}, str(out / "config.json"))
    weights = HiggsWeights(cfg)
    _randomise(weights, gen)
    with torch.no_grad():  # stream BOS / EOS rows of the tied table: small, so random codes win (see above)
        weights.model.embed_audio_tokens.embed_audio_tokens.weight.view(8, 1026, -1)[:, 1024:] *= 0.0
    sd: dict[str, torch.Tensor] = {}
    for k, v in weights.state_dict().items():
        if k == "model.embed_tokens.weight":
            sd["tied.embedding.text_embedding.weight"] = v
        elif k == "model.embed_audio_tokens.embed_audio_tokens.weight":
            sd[V3_EMBED] = v
        else:
            sd["body." + k[len("model.") :]] = v
    sd["tied.head.text_head.weight"] = torch.zeros(text["vocab_size"], text["hidden_size"])
    codec_dir = out / ".codec"
    write_codec(codec_dir, "tiny" if size == "tiny" else "v2-3b", gen, encoder=False)
    from safetensors.torch import load_file

    for k, v in load_file(str(codec_dir / "model.safetensors")).items():
        sd[V3_CODEC_PREFIX + k] = v
    sd[V3_CODEC_PREFIX + "acoustic_encoder.conv1.weight"] = torch.zeros(4, 1, 7)  # an encoder part: skipped
    import shutil

    shutil.rmtree(codec_dir)
    save_weights(sd, out)
    return out


def build_sized(out: Path, family: str, size: str, seed: int = 0, max_new_tokens: int = 300) -> Path:
    """`scripts/make_tiny.py --family higgs|higgs-v3 --size ...`: the transformers-layout v2 (sizes tiny,
    v2-3b) or v3 (tiny, v3-4b) builder; `real` is the released size (v2-3b, v3-4b). Real sizes are built in
    bfloat16 (half the memory of float32)."""
    sizes = SIZES if family == "higgs" else V3_SIZES
    if size == "real":  # the released size of the family (as --size real for CosyVoice 3)
        size = "v2-3b" if family == "higgs" else "v3-4b"
    if size not in sizes:
        raise SystemExit(f"--size must be one of {', '.join(sizes)} for {family}, got {size!r}")
    old = torch.get_default_dtype()
    if size not in ("tiny", "bench"):
        torch.set_default_dtype(torch.bfloat16)
    try:
        if family == "higgs":
            return build_tiny(out, size=size, seed=seed, max_new_tokens=max_new_tokens)
        return build_tiny_v3(out, size=size, seed=seed, max_new_tokens=max_new_tokens)
    finally:
        torch.set_default_dtype(old)
