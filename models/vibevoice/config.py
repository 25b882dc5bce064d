"""VibeVoice's config.json (transformers `VibeVoiceConfig`, model_type "vibevoice") and the fields of
generation_config.json that `VibeVoiceGenerationMixin` reads, parsed into plain dataclasses.

config.json nests four sub-configs: `text_config` (the Qwen2.5 LM), `audio_config` (the sigma-VAE acoustic
tokenizer: its decoder turns a 64-d latent into `hop_length` samples), `semantic_model_config` (an encoder
of the same shape with a wider latent: it re-encodes the decoded audio for the next LM input) and
`diffusion_head_config`. Missing keys take transformers' defaults (the values of VibeVoice-1.5B).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..base import CheckpointError
from ..flowlm.config import Qwen2Config
from ..locate import read_json


@dataclass(frozen=True)
class CodecConfig:
    """One acoustic-tokenizer half (decoder or semantic encoder): its conv stack's shape."""

    hidden_size: int  # latent width (64 acoustic, 128 semantic)
    channels: int
    kernel_size: int
    num_filters: int
    ratios: tuple[int, ...]  # downsampling ratios, encoder order (the decoder runs them reversed)
    depths: tuple[int, ...]  # ConvNeXt blocks: the stem's, then one per ratio
    ffn_expansion: int
    rms_norm_eps: float
    hidden_act: str

    @property
    def hop_length(self) -> int:
        return int(math.prod(self.ratios))


@dataclass(frozen=True)
class HeadConfig:
    hidden_size: int
    latent_size: int
    num_layers: int
    intermediate_size: int
    rms_norm_eps: float
    frequency_embedding_size: int
    max_period: int


@dataclass(frozen=True)
class VibeVoiceConfig:
    text: Qwen2Config
    acoustic: CodecConfig
    semantic: CodecConfig
    head: HeadConfig
    eos_token_id: int
    audio_bos_token_id: int
    audio_eos_token_id: int
    audio_token_id: int

    @property
    def hop_length(self) -> int:
        return self.acoustic.hop_length

    @property
    def choices(self) -> tuple[int, int, int, int]:
        """The four tokens the LM may emit (VibeVoiceTokenConstraintProcessor's, in its order)."""
        return (self.audio_bos_token_id, self.audio_eos_token_id, self.audio_token_id, self.eos_token_id)


def _codec(d: dict[str, Any], where: str, default_hidden: int) -> CodecConfig:
    ratios = tuple(int(r) for r in d.get("downsampling_ratios", (2, 2, 4, 5, 5, 8)))
    depths = tuple(int(x) for x in d.get("depths", (3, 3, 3, 3, 3, 3, 8)))
    if len(depths) != len(ratios) + 1:
        raise CheckpointError(f"{where}: depths needs one entry more than downsampling_ratios, got "
                              f"{len(depths)} and {len(ratios)}")
    return CodecConfig(
        hidden_size=int(d.get("hidden_size", default_hidden)),
        channels=int(d.get("channels", 1)),
        kernel_size=int(d.get("kernel_size", 7)),
        num_filters=int(d.get("num_filters", 32)),
        ratios=ratios,
        depths=depths,
        ffn_expansion=int(d.get("ffn_expansion", 4)),
        rms_norm_eps=float(d.get("rms_norm_eps", 1e-5)),
        hidden_act=str(d.get("hidden_act", "gelu")),
    )


def parse_config(raw: dict[str, Any], where: str) -> VibeVoiceConfig:
    if raw.get("model_type") != "vibevoice":
        raise CheckpointError(f"{where}: model_type must be 'vibevoice', got {raw.get('model_type')!r}")
    t = raw.get("text_config") or {}
    heads = int(t.get("num_attention_heads", 12))
    hidden = int(t.get("hidden_size", 1536))
    if t.get("head_dim") not in (None, hidden // heads):
        raise CheckpointError(f"{where}: text_config.head_dim must be hidden_size / num_attention_heads")
    rope = t.get("rope_parameters") or {}
    if rope.get("rope_type", "default") != "default":
        raise CheckpointError(f"{where}: only the default rope is supported, got {rope.get('rope_type')!r}")
    text = Qwen2Config(
        hidden_size=hidden,
        intermediate_size=int(t.get("intermediate_size", 8960)),
        num_hidden_layers=int(t.get("num_hidden_layers", 28)),
        num_attention_heads=heads,
        num_key_value_heads=int(t.get("num_key_value_heads", 2)),
        rms_norm_eps=float(t.get("rms_norm_eps", 1e-6)),
        rope_theta=float(rope.get("rope_theta", t.get("rope_theta", 1000000.0))),
        vocab_size=int(t.get("vocab_size", 151936)),
        max_position_embeddings=int(t.get("max_position_embeddings", 65536)),
        tie_word_embeddings=bool(t.get("tie_word_embeddings", raw.get("tie_word_embeddings", True))),
    )
    acoustic = _codec(raw.get("audio_config") or {}, where + " audio_config", 64)
    semantic = _codec(raw.get("semantic_model_config") or {}, where + " semantic_model_config", 128)
    if semantic.hop_length != acoustic.hop_length:
        raise CheckpointError(f"{where}: the semantic encoder's hop ({semantic.hop_length}) must equal the "
                              f"acoustic decoder's ({acoustic.hop_length}): one latent per frame")
    h = raw.get("diffusion_head_config") or {}
    head = HeadConfig(
        hidden_size=hidden,
        latent_size=acoustic.hidden_size,
        num_layers=int(h.get("num_hidden_layers", 4)),
        intermediate_size=int(h.get("intermediate_size", 4608)),
        rms_norm_eps=float(h.get("rms_norm_eps", 1e-5)),
        frequency_embedding_size=int(h.get("frequency_embedding_size", 256)),
        max_period=int(h.get("diffusion_max_period", 10000)),
    )
    if h.get("hidden_act", "silu") != "silu" or t.get("hidden_act", "silu") != "silu":
        raise CheckpointError(f"{where}: the LM and the diffusion head must use silu")
    for c, name in ((acoustic, "audio_config"), (semantic, "semantic_model_config")):
        if c.hidden_act != "gelu":
            raise CheckpointError(f"{where}: {name}.hidden_act must be gelu, got {c.hidden_act!r}")
    return VibeVoiceConfig(
        text=text,
        acoustic=acoustic,
        semantic=semantic,
        head=head,
        eos_token_id=int(raw.get("eos_token_id", 151643)),
        audio_bos_token_id=int(raw.get("audio_bos_token_id", 151652)),
        audio_eos_token_id=int(raw.get("audio_eos_token_id", 151653)),
        audio_token_id=int(raw.get("audio_token_id", 151654)),
    )


def read_config(root: Path) -> VibeVoiceConfig:
    path = root / "config.json"
    return parse_config(read_json(path), str(path))


@dataclass(frozen=True)
class GenerationDefaults:
    """What generate() takes from generation_config.json (absent keys: the mixin's own defaults)."""

    guidance_scale: float = 1.0
    num_diffusion_steps: int = 10
    max_new_tokens: int | None = None
    scheduler: tuple[tuple[str, Any], ...] = (
        ("beta_schedule", "squaredcos_cap_v2"), ("prediction_type", "v_prediction"))

    @classmethod
    def read(cls, path: Path) -> GenerationDefaults:
        if not path.exists():
            return cls()
        g = read_json(path)
        name = g.get("noise_scheduler_class", "DPMSolverMultistepScheduler")
        if name != "DPMSolverMultistepScheduler":
            raise CheckpointError(f"{path}: noise_scheduler_class {name!r} is not supported (only "
                                  "DPMSolverMultistepScheduler)")
        sched = g.get("noise_scheduler_config", dict(cls.scheduler))
        gs = g.get("guidance_scale")
        return cls(
            guidance_scale=1.0 if gs is None else float(gs),
            num_diffusion_steps=int(g.get("num_diffusion_steps") or 10),
            max_new_tokens=g.get("max_new_tokens"),
            scheduler=tuple(sorted(sched.items())),
        )
