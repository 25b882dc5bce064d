"""A transformers `MimiConfig` as the shared Mimi codec reads it (config.json as transformers 4.5x or 5.x
writes it: absent or null -> MimiConfig's default, a value of the wrong kind -> CheckpointError naming the
key and the file)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ...base import CheckpointError
from ...config_fields import get_float, get_int, rope_theta


@dataclass(frozen=True)
class MimiConfig:
    """The fields of a transformers `MimiConfig` (Qwen3-TTS's speech_tokenizer `encoder_config`, CSM's
    `codec_config`, kyutai/mimi's config.json) that the encoder and the decoder read."""

    sampling_rate: int = 24000
    frame_rate: float = 12.5
    audio_channels: int = 1
    hidden_size: int = 512
    num_filters: int = 64
    num_residual_layers: int = 1
    upsampling_ratios: tuple[int, ...] = (8, 6, 5, 4)
    kernel_size: int = 7
    last_kernel_size: int = 3
    residual_kernel_size: int = 3
    dilation_growth_rate: int = 2
    compress: int = 2
    codebook_size: int = 2048
    codebook_dim: int = 256
    num_quantizers: int = 32
    num_semantic_quantizers: int = 1
    vq_hidden_dim: int = 256
    num_layers: int = 8
    intermediate_size: int = 2048
    num_heads: int = 8
    num_kv_heads: int = 8
    head_dim: int = 64
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    attention_bias: bool = False
    layer_scale_initial_scale: float = 0.01
    pad_mode: str = "constant"
    # keys at most this far back are attended to (transformers 5.x masks with it; 4.5x did not)
    sliding_window: int = 250
    upsample_groups: int = 512  # the 12.5 -> 25 Hz transposed conv is depthwise (groups = hidden)

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "Mimi config") -> MimiConfig:
        """As transformers 4.5x or 5.x writes a MimiConfig (5.x: `rope_parameters`, no `rope_theta`);
        absent or null -> MimiConfig's default, a wrong kind -> CheckpointError naming key and file."""
        if not d.get("use_causal_conv", True) or d.get("use_conv_shortcut", False):
            raise CheckpointError(
                f"{where}: only the causal, shortcut-free Mimi (as Qwen3-TTS and CSM ship it) is supported"
            )
        if get_float(d, "trim_right_ratio", 1.0, where) != 1.0:
            raise CheckpointError(f"{where}: trim_right_ratio must be 1.0 (the causal Mimi)")

        def i(key: str, default: int) -> int:
            return get_int(d, key, default, where)

        hidden, heads = i("hidden_size", 512), i("num_attention_heads", 8)
        ratios = d.get("upsampling_ratios") or (8, 6, 5, 4)
        return cls(
            sampling_rate=i("sampling_rate", 24000),
            frame_rate=get_float(d, "frame_rate", get_float(d, "_frame_rate", 12.5, where), where),
            audio_channels=i("audio_channels", 1),
            hidden_size=hidden,
            num_filters=i("num_filters", 64),
            num_residual_layers=i("num_residual_layers", 1),
            upsampling_ratios=tuple(
                get_int({"upsampling_ratios": r}, "upsampling_ratios", None, where) for r in ratios
            ),
            kernel_size=i("kernel_size", 7),
            last_kernel_size=i("last_kernel_size", 3),
            residual_kernel_size=i("residual_kernel_size", 3),
            dilation_growth_rate=i("dilation_growth_rate", 2),
            compress=i("compress", 2),
            codebook_size=i("codebook_size", 2048),
            codebook_dim=i("codebook_dim", 256),
            num_quantizers=i("num_quantizers", 32),
            num_semantic_quantizers=i("num_semantic_quantizers", 1),
            vq_hidden_dim=i("vector_quantization_hidden_dimension", 256),
            num_layers=i("num_hidden_layers", 8),
            intermediate_size=i("intermediate_size", 2048),
            num_heads=heads,
            num_kv_heads=i("num_key_value_heads", heads),
            head_dim=i("head_dim", hidden // heads),
            rope_theta=rope_theta(d, 10000.0, where),
            norm_eps=get_float(d, "norm_eps", 1e-5, where),
            attention_bias=bool(d.get("attention_bias") or False),
            layer_scale_initial_scale=get_float(d, "layer_scale_initial_scale", 0.01, where),
            pad_mode=str(d.get("pad_mode") or "constant"),
            sliding_window=i("sliding_window", 250),
            upsample_groups=i("upsample_groups", hidden),
        )

    @property
    def encodec_frame_rate(self) -> int:
        return math.ceil(self.sampling_rate / math.prod(self.upsampling_ratios))

    @property
    def latent_stride(self) -> int:
        """The 25 Hz -> 12.5 Hz down/upsampling stride."""
        return int(self.encodec_frame_rate / self.frame_rate)

    @property
    def samples_per_frame(self) -> int:
        return math.prod(self.upsampling_ratios) * self.latent_stride
