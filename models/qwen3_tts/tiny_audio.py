"""Random-weight audio parts of tiny Qwen3-TTS checkpoints, in the exact official layout.

`build_speech_tokenizer(out_dir, size, seed)` writes out_dir/speech_tokenizer/{config.json,
model.safetensors, preprocessor_config.json} (Mimi encoder `encoder.*` + 12 Hz decoder `decoder.*`);
`speaker_encoder_weights(...)` returns the ECAPA `speaker_encoder.*` tensors for a Base checkpoint.

Random values are O(1) for every kind of parameter (codebooks, cluster usage, LayerScale, ConvNeXt
gamma, SnakeBeta, norms) so that each sub-block visibly shapes the output; the default inits would leave
silent codebooks and 1e-6 gammas. The last decoder conv is rescaled so the waveform std is about 0.1
(unclipped). One torch.Generator per seed, parameters visited in a fixed order: same bytes on rebuild.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import nn

from .codec import CodecDecoder, CodecDecoderConfig
from .codec_layers import ConvNeXtBlock, SnakeBeta
from .codec_transformer import LayerScale
from .mimi_encoder import EuclideanCodebook, MimiEncoderConfig, MimiEncoderModel, _Scale
from .speaker_encoder import SpeakerEncoder, SpeakerEncoderConfig

WAV_STD = 0.1

# Sizes: "tiny" = the oracle builder's dims (codebook 128, so the talker's 128 + 1024 vocab keeps the
# "last 1024 ids are specials" rule); "cpu-bench" = the real 2048 codebook with moderate widths, for
# CPU serving benchmarks (about 4x the tiny decoder's width, 4 transformer layers); "real" = the
# official 12 Hz tokenizer's dimensions (decoder from the design notes section 2, about 114 M params;
# encoder = transformers' MimiConfig defaults, which the official tokenizer config class falls back
# to), for GPU benchmarks of the real architecture with random weights.
_DECODER: dict[str, dict[str, Any]] = {
    "tiny": dict(
        codebook_size=128,
        codebook_dim=32,
        hidden_size=32,
        latent_dim=48,
        head_dim=8,
        num_attention_heads=4,
        num_key_value_heads=4,
        intermediate_size=64,
        num_hidden_layers=2,
        decoder_dim=32,
    ),
    "cpu-bench": dict(
        codebook_size=2048,
        codebook_dim=64,
        hidden_size=128,
        latent_dim=128,
        head_dim=32,
        num_attention_heads=4,
        num_key_value_heads=4,
        intermediate_size=256,
        num_hidden_layers=4,
        decoder_dim=128,
    ),
    "real": dict(
        codebook_size=2048,
        codebook_dim=512,
        hidden_size=512,
        latent_dim=1024,
        head_dim=64,
        num_attention_heads=16,
        num_key_value_heads=16,
        intermediate_size=1024,
        num_hidden_layers=8,
        decoder_dim=1536,
    ),
}
_ENCODER: dict[str, dict[str, Any]] = {
    "tiny": dict(
        hidden_size=32,
        num_filters=4,
        codebook_size=128,
        codebook_dim=16,
        vector_quantization_hidden_dimension=16,
        num_hidden_layers=1,
        intermediate_size=64,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=16,
    ),
    "cpu-bench": dict(
        hidden_size=64,
        num_filters=8,
        codebook_size=2048,
        codebook_dim=32,
        vector_quantization_hidden_dimension=32,
        num_hidden_layers=2,
        intermediate_size=128,
        num_attention_heads=4,
        num_key_value_heads=4,
        head_dim=16,
    ),
    # MimiConfig defaults (transformers 4.57); they override the shared fields below where they differ.
    "real": dict(
        hidden_size=512,
        num_filters=64,
        codebook_size=2048,
        codebook_dim=256,
        vector_quantization_hidden_dimension=256,
        num_hidden_layers=8,
        intermediate_size=2048,
        num_attention_heads=8,
        num_key_value_heads=8,
        head_dim=64,
        num_quantizers=32,
        upsample_groups=512,
    ),
}
SIZES = tuple(_DECODER)
# The speech tokenizer the talker builder pairs with each codebook size (tiny.py picks "real" by name).
_BY_CODEBOOK = {128: "tiny", 2048: "cpu-bench"}


def speech_tokenizer_config(size: str = "tiny") -> dict[str, Any]:
    """config.json of the speech tokenizer (Qwen3TTSTokenizerV2Config) for `size`."""
    if size not in _DECODER:
        raise ValueError(f"unknown speech tokenizer size {size!r}; choose one of {', '.join(SIZES)}")
    enc = dict(
        sampling_rate=24000,
        frame_rate=12.5,
        audio_channels=1,
        num_residual_layers=1,
        upsampling_ratios=[8, 6, 5, 4],
        kernel_size=7,
        last_kernel_size=3,
        residual_kernel_size=3,
        dilation_growth_rate=2,
        use_causal_conv=True,
        use_conv_shortcut=False,
        pad_mode="constant",
        compress=2,
        trim_right_ratio=1.0,
        num_quantizers=16,
        num_semantic_quantizers=1,
        upsample_groups=32,
        sliding_window=250,
        max_position_embeddings=8000,
        rope_theta=10000.0,
        norm_eps=1e-5,
        hidden_act="gelu",
        layer_scale_initial_scale=0.01,
        use_cache=False,
        model_type="mimi",
    )
    enc.update(_ENCODER[size])  # per-size values win over the shared ones (the real size sets all)
    dec = dict(
        sliding_window=72,
        max_position_embeddings=8000,
        rope_theta=10000,
        rms_norm_eps=1e-5,
        layer_scale_initial_scale=0.01,
        num_quantizers=16,
        num_semantic_quantizers=1,
        upsample_rates=[8, 5, 4, 3],
        upsampling_ratios=[2, 2],
        hidden_act="silu",
        attention_bias=False,
        attention_dropout=0.0,
        **_DECODER[size],
    )
    return dict(
        architectures=["Qwen3TTSTokenizerV2Model"],
        model_type="qwen3_tts_tokenizer_12hz",
        encoder_config=enc,
        decoder_config=dec,
        encoder_valid_num_quantizers=16,
        input_sample_rate=24000,
        output_sample_rate=24000,
        decode_upsample_rate=1920,
        encode_downsample_rate=1920,
    )


PREPROCESSOR_CONFIG = {
    "feature_extractor_type": "EncodecFeatureExtractor",
    "feature_size": 1,
    "padding_side": "right",
    "padding_value": 0.0,
    "return_attention_mask": True,
    "sampling_rate": 24000,
    "chunk_length_s": None,
    "overlap": None,
}


@torch.no_grad()
def randomize(model: nn.Module, g: torch.Generator) -> None:
    """Overwrite every parameter and codebook buffer with O(1)-scale values drawn from `g`."""

    def rn(shape: torch.Size) -> torch.Tensor:
        return torch.randn(shape, generator=g)

    for _, m in model.named_modules():
        tensors = dict(m.named_parameters(recurse=False))
        if isinstance(m, EuclideanCodebook):  # Mimi keeps its codebooks as buffers
            tensors = dict(m.named_buffers(recurse=False))
        for n, p in tensors.items():
            if n == "initialized":
                v = torch.ones_like(p)
            elif isinstance(m, nn.Linear | nn.Conv1d | nn.ConvTranspose1d) and n == "weight":
                fan_in = p.shape[1] * (p.shape[2] if p.dim() == 3 else 1)
                if isinstance(m, nn.ConvTranspose1d):
                    fan_in = p.shape[0] * p.shape[2] // max(1, m.stride[0])
                v = rn(p.shape) / math.sqrt(fan_in)
            elif n == "bias":
                v = 0.05 * rn(p.shape)
            elif isinstance(m, nn.LayerNorm) or type(m).__name__ == "RMSNorm":
                v = 1.0 + 0.1 * rn(p.shape)
            elif isinstance(m, LayerScale | _Scale) or (isinstance(m, ConvNeXtBlock) and n == "gamma"):
                v = 0.5 + 0.1 * rn(p.shape)
            elif isinstance(m, SnakeBeta):  # log-alpha / log-beta
                v = 0.2 * rn(p.shape)
            elif n == "cluster_usage":
                v = 0.5 + torch.rand(p.shape, generator=g)
            elif n in ("embedding_sum", "embed_sum"):
                v = rn(p.shape) * (0.5 + torch.rand(p.shape[:1] + (1,), generator=g))
            else:
                raise AssertionError(f"no random init rule for {type(m).__name__}.{n}")
            p.copy_(v.to(p.dtype))


@torch.no_grad()
def calibrate_decoder(dec: CodecDecoder, g: torch.Generator, scale: float | None = None) -> float:
    """Scale the last conv so the random decoder's waveform std is WAV_STD before the clamp; returns
    the factor. `scale` (an earlier run's factor, e.g. the demo's shipped one) skips the measurement."""
    if scale is None:
        codes = torch.randint(0, dec.cfg.codebook_size, (1, dec.cfg.num_quantizers, 40), generator=g)
        scale = WAV_STD / float(dec.unclamped(codes).std())
    last = dec.decoder[-1].conv
    last.weight.mul_(scale)
    last.bias.mul_(scale)
    return scale


def speech_tokenizer_tensors(size: str = "tiny", seed: int = 1234, decoder_scale: float | None = None
                             ) -> dict[str, torch.Tensor]:
    cfg = speech_tokenizer_config(size)
    g = torch.Generator().manual_seed(seed)
    enc = MimiEncoderModel(MimiEncoderConfig.from_dict(cfg["encoder_config"]))
    dec = CodecDecoder(CodecDecoderConfig.from_dict(cfg["decoder_config"]))
    randomize(enc, g)
    randomize(dec, g)
    calibrate_decoder(dec, g, decoder_scale)  # the last draws from g: a given scale changes no other tensor
    tensors = {f"encoder.{k}": v for k, v in enc.state_dict().items()}
    tensors.update({f"decoder.{k}": v for k, v in dec.state_dict().items()})
    return {k: v.contiguous() for k, v in sorted(tensors.items())}


def measured_decoder_scale(size: str = "tiny", seed: int = 1235) -> float:
    """The factor `calibrate_decoder` measures for this size and seed (to ship it with the demo)."""
    cfg = speech_tokenizer_config(size)
    g = torch.Generator().manual_seed(seed)
    randomize(MimiEncoderModel(MimiEncoderConfig.from_dict(cfg["encoder_config"])), g)
    dec = CodecDecoder(CodecDecoderConfig.from_dict(cfg["decoder_config"]))
    randomize(dec, g)
    return calibrate_decoder(dec, g)


def build_speech_tokenizer(out_dir: str | Path, size: str = "tiny", seed: int = 1235,
                           decoder_scale: float | None = None) -> Path:
    """Write out_dir/speech_tokenizer/{config.json, model.safetensors, preprocessor_config.json}."""
    st = Path(out_dir) / "speech_tokenizer"
    st.mkdir(parents=True, exist_ok=True)
    (st / "config.json").write_text(json.dumps(speech_tokenizer_config(size), indent=2, sort_keys=True))
    (st / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR_CONFIG, indent=2, sort_keys=True))
    save_file(speech_tokenizer_tensors(size, seed, decoder_scale), str(st / "model.safetensors"),
              metadata={"format": "pt"})
    return st


def build_speech_tokenizer_weights(
    st_dir: str | Path, codebook_size: int = 128, seed: int = 1235, size: str | None = None,
    decoder_scale: float | None = None,
) -> Path:
    """Like `build_speech_tokenizer` but writes INTO `st_dir`; `size` names one of SIZES, else it is
    picked by codebook (128 tiny, 2048 cpu-bench)."""
    if size is None:
        if codebook_size not in _BY_CODEBOOK:
            raise ValueError(
                f"no speech tokenizer size with codebook {codebook_size}; known: {sorted(_BY_CODEBOOK)}"
            )
        size = _BY_CODEBOOK[codebook_size]
    elif size in _DECODER and _DECODER[size]["codebook_size"] != codebook_size:
        raise ValueError(f"speech tokenizer size {size!r} does not have codebook {codebook_size}")
    st = Path(st_dir)
    tmp_root = st.parent / f".{st.name}-build"
    built = build_speech_tokenizer(tmp_root, size, seed, decoder_scale)
    st.mkdir(parents=True, exist_ok=True)
    for f in built.iterdir():
        f.replace(st / f.name)
    built.rmdir()
    tmp_root.rmdir()
    return st


def speaker_encoder_config(enc_dim: int, channels: tuple[int, ...] = (32, 32, 32, 32, 96)) -> dict[str, Any]:
    """`speaker_encoder_config` for config.json. Small channel counts get proportionally small
    attention / SE widths (the oracle's tiny: 16); real checkpoints use 128."""
    small = max(channels) < 512
    return SpeakerEncoderConfig(
        enc_dim=enc_dim,
        enc_channels=tuple(channels),
        enc_attention_channels=16 if small else 128,
        enc_se_channels=16 if small else 128,
    ).to_dict()


def speaker_encoder_weights(
    enc_dim: int | dict[str, Any], channels: tuple[int, ...] = (32, 32, 32, 32, 96), seed: int = 1236
) -> dict[str, torch.Tensor]:
    """`speaker_encoder.*` tensors (to merge into the main model.safetensors of a Base checkpoint).
    `enc_dim` may also be a whole `speaker_encoder_config` dict."""
    cfg = enc_dim if isinstance(enc_dim, dict) else speaker_encoder_config(enc_dim, channels)
    enc = SpeakerEncoder(SpeakerEncoderConfig.from_dict(cfg))
    randomize(enc, torch.Generator().manual_seed(seed))
    return {f"speaker_encoder.{k}": v.contiguous() for k, v in sorted(enc.state_dict().items())}
