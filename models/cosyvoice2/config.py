"""Typed view of a CosyVoice 2 checkpoint: `cosyvoice2.yaml` (Qwen2LM head, CausalMaskedDiffWithXvec flow
with its UpsampleConformerEncoder and CausalConditionalDecoder, HiFTGenerator) and `CosyVoice-BlankEN/`
(the Qwen2 backbone). The LM and vocoder fields are the library's (models/flowlm/config.py,
models/codecs/hift/config.py); defaults are CosyVoice2-0.5B's values (its cosyvoice2.yaml)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..base import CheckpointError
from ..flowlm.config import QWEN_DIR, FlowLMConfig, read_sections
from ..flowlm.yaml_config import pick_fields

YAML = "cosyvoice2.yaml"
FAMILY = "CosyVoice 2"
SPEECH_TOKENIZER = "speech_tokenizer_v2.onnx"  # CosyVoice 3 has v3; same interface (25 Hz tokens)
__all__ = ["QWEN_DIR", "YAML", "CosyVoice2Config", "parse_config"]


@dataclass(frozen=True)
class EncoderConfig:
    """UpsampleConformerEncoder: linear embed + rel-pos conformer layers (no macaron, no conv module),
    x2 upsampling, more layers; `static_chunk_size` tokens per block when streaming."""

    output_size: int = 512
    attention_heads: int = 8
    linear_units: int = 2048
    num_blocks: int = 6
    up_blocks: int = 4  # hard-coded in upstream
    static_chunk_size: int = 25


@dataclass(frozen=True)
class DecoderConfig:
    """CausalConditionalDecoder (the CFM estimator): a 1-D UNet of causal resnet + transformer blocks."""

    in_channels: int = 320
    out_channels: int = 80
    channels: tuple[int, ...] = (256,)
    attention_head_dim: int = 64
    n_blocks: int = 4
    num_mid_blocks: int = 12
    num_heads: int = 8
    static_chunk_size: int = 50  # mel frames per block of the block-causal attention when streaming


@dataclass(frozen=True)
class FlowConfig:
    encoder: EncoderConfig
    decoder: DecoderConfig
    input_size: int = 512
    output_size: int = 80
    spk_embed_dim: int = 192
    vocab_size: int = 6561
    token_mel_ratio: int = 2
    pre_lookahead_len: int = 3
    inference_cfg_rate: float = 0.7
    t_scheduler: str = "cosine"
    n_timesteps: int = 10  # hard-coded in upstream's CausalMaskedDiffWithXvec.inference


class CosyVoice2Config(FlowLMConfig[FlowConfig]):
    """A CosyVoice 2 checkpoint: the library's config with the conformer + UNet flow."""


def parse_config(root: Path) -> CosyVoice2Config:
    sec = read_sections(root, YAML, FAMILY, (".Qwen2LM", "CausalMaskedDiffWithXvec", ".HiFTGenerator"))
    where, flow = sec.where, sec.flow
    enc = flow.get("encoder") or {}
    enc_cfg = EncoderConfig(**pick_fields(enc, EncoderConfig))
    for key, want in (("pos_enc_layer_type", "rel_pos_espnet"), ("selfattention_layer_type", "rel_selfattn"),
                      ("input_layer", "linear")):
        if enc.get(key, want) != want:
            raise CheckpointError(f"{where}: flow encoder {key} is {enc.get(key)!r}; voxcli serves {want!r}")
    if enc.get("use_cnn_module") or enc.get("macaron_style"):
        raise CheckpointError(
            f"{where}: a flow encoder with a conv module or macaron FFN is not CosyVoice 2's"
        )
    fl = FlowConfig(
        encoder=enc_cfg,
        decoder=DecoderConfig(**pick_fields(sec.estimator(), DecoderConfig)),
        **{k: v for k, v in pick_fields(flow, FlowConfig).items() if k not in ("encoder", "decoder")},
        **sec.cfm(),
    )
    if fl.decoder.static_chunk_size != fl.encoder.static_chunk_size * fl.token_mel_ratio:
        raise CheckpointError(
            f"{where}: the decoder's block ({fl.decoder.static_chunk_size} frames) is not the encoder's "
            f"({fl.encoder.static_chunk_size} tokens) x token_mel_ratio {fl.token_mel_ratio}"
        )
    return CosyVoice2Config(lm=sec.lm, flow=fl, hift=sec.hift, **sec.rates(), raw=sec.raw)
