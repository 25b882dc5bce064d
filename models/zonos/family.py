"""Zonos v0.1 (Zyphra) as a registered family (see models/registry.py). Imports nothing heavy: the program,
the demo and tiny builders and the sim profile load when first used.

Only the transformer variant is served (Zyphra/Zonos-v0.1-transformer): the hybrid's Mamba2 layers need
mamba-ssm's CUDA kernels, and its config.json is refused in one sentence (config.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..registry import Demo, Family, HubModel, SimModel, SimSpec, Tiny
from .options import OPTIONS
from .spec import DAC_RATIOS, DEFAULT_CHUNKS, HOP, SAMPLE_RATE


def load(path: str, device: str = "cpu", dtype: str = "float32") -> Any:
    from .program import ZonosProgram

    return ZonosProgram.load(path, device=device, dtype=dtype)


def describe(path: str) -> Any:
    from .spec import model_spec

    return model_spec(Path(path), Path(path).name)


def claims(path: Path) -> bool:
    """A Zonos folder: a config.json with Zonos' `backbone` and `prefix_conditioner` and no model_type."""
    cfg = Path(path) / "config.json"
    if not cfg.is_file():
        return False
    try:
        d = json.loads(cfg.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(d, dict) and "model_type" not in d and "backbone" in d and "prefix_conditioner" in d


def build_demo(out: Path) -> None:
    from .tiny import build_tiny

    build_tiny(out, size="tiny")


def build_tiny(out: Path, size: str = "tiny", seed: int | None = None, **options: Any) -> Path:
    from .tiny import SEED
    from .tiny import build_tiny as build

    return build(out, size=size, seed=SEED if seed is None else seed, **options)


def tiny_sizes() -> tuple[str, ...]:
    from .tiny import SIZES

    return tuple(SIZES)


def calibration() -> Any:
    from .sim import CALIBRATION

    return CALIBRATION


# Zonos-v0.1-transformer's dimensions (the released config.json's backbone: d_model 2048, 16 query / 4 KV
# heads, MLP 8192 as the hybrid's; 26 transformer layers, ~1.6B parameters) and DAC 44.1 kHz's decoder.
ZONOS_V01 = {
    "backbone": dict(
        hidden=2048, layers=26, heads=16, kv_heads=4, head_dim=128, mlp=8192, codebooks=9, head_vocab=1025
    ),
    "dac": dict(hidden=1536, rates=(8, 8, 4, 2), codebooks=9, codebook_dim=8, latent=1024, hop=512),
}


def _lookahead() -> float:
    from ..codecs.dac.config import decoder_lookahead_frames

    return decoder_lookahead_frames(DAC_RATIOS)


FAMILY = Family(
    name="Zonos",
    model_types=(),
    load=load,
    describe=describe,
    claims=claims,
    tiny=(Tiny("zonos", build_tiny, tiny_sizes),),
    hub_models=(
        HubModel(
            "Zyphra/Zonos-v0.1-transformer",
            "Multilingual TTS (espeak phonemes) with emotion, pitch and rate conditioning, CFG; DAC 44.1 kHz",
            "zonos-v0.1",
        ),
    ),
    demos=(
        Demo(
            "demo-zonos",
            build_demo,
            version="2",
            recipe="demo-zonos",
            description="tiny random Zonos (prefix conditioning, CFG, delay pattern), offline; not speech",
        ),
    ),
    options=OPTIONS,
    # Saved speaker embeddings (speakers/NAME.npy beside a checkpoint; spec.voices reads the folder): the
    # demo's two. The released checkpoint ships none.
    voices=("aurora", "basalt"),
    # The released checkpoint names no voices (every OpenAI name is its default speaker); the demo's two saved
    # embeddings (tiny.py) take the OpenAI names by their character, brighter / deeper.
    openai_voices={
        **dict.fromkeys(("alloy", "coral", "nova", "shimmer", "sage", "ballad"), ("aurora",)),
        **dict.fromkeys(("ash", "echo", "fable", "onyx", "verse"), ("basalt",)),
    },
    calibration=calibration,
    # 44.1 kHz PCM, 512 samples (11.6 ms) per frame, 9 codebooks.
    sim=SimSpec(
        sample_rate=SAMPLE_RATE,
        frame_rate=SAMPLE_RATE / HOP,
        samples_per_frame=HOP,
        codebooks=9,
        chunk=DEFAULT_CHUNKS,
        models=(SimModel("zonos-v0.1", ZONOS_V01, gpu_profile="{gpu}-zonos-v0.1"),),
        cfg_scale=2.0,  # generate()'s default: every request is a pair
        lead_steps=8,  # the delay pattern: the first frame comes 8 decode steps after prefill
        codec_lookahead_frames=_lookahead(),
    ),
)
