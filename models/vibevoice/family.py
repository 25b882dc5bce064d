"""VibeVoice (Microsoft, transformers layout) as a registered family (see models/registry.py). Imports
nothing heavy: the program, the builders and the reference load when first used."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from ..registry import Demo, Family, HubModel, SimModel, SimSpec, Tiny
from .options import OPTIONS
from .spec import DEFAULT_CHUNKS, VOICES


def load(path: str, device: str = "cpu", dtype: str = "float32") -> Any:
    from .program import VibeVoiceProgram

    return VibeVoiceProgram.load(path, device=device, dtype=dtype)


def describe(path: str) -> Any:
    from ..locate import read_json
    from .spec import model_spec

    return model_spec(read_json(Path(path) / "config.json"), Path(path).name)


def build_demo(out: Path) -> None:
    """The demo: the tiny checkpoint, drawn and calibrated in this interpreter (no transformers)."""
    from .tiny import build_tiny

    build_tiny(out, size="tiny")


def build_tiny(out: Path, size: str = "tiny", seed: int | None = None, **options: Any) -> Path:
    from .tiny import SEED
    from .tiny import build_tiny as build

    return build(Path(out), size=size, seed=SEED if seed is None else seed, **options)


def tiny_sizes() -> tuple[str, ...]:
    from .tiny import SIZES

    return SIZES


def reference() -> ModuleType:
    from . import reference as module

    return module


def calibration() -> Any:
    from .sim import CALIBRATION

    return CALIBRATION


# VibeVoice-1.5B's published dimensions (vibevoice/VibeVoice-1.5B-hf config.json): a Qwen2.5-1.5B LM
# (28 layers, 1536 wide, 12 / 2 heads of 128, MLP 8960), a 4-layer diffusion head (MLP 4608, 256-d
# timestep features, 64-d latent), the sigma-VAE acoustic tokenizer (32 filters, ratios 2,2,4,5,5,8 = 3200
# samples a frame, depths 3,3,3,3,3,3,8, kernel 7, MLP x4) and its 128-d semantic encoder, as sim.py
# reads them.
VIBEVOICE_15B = {
    "lm": dict(hidden=1536, layers=28, heads=12, kv_heads=2, head_dim=128, mlp=8960),
    "head": dict(hidden=1536, layers=4, mlp=4608, latent=64, freq=256),
    "codec": dict(filters=32, ratios=(2, 2, 4, 5, 5, 8), depths=(3, 3, 3, 3, 3, 3, 8), kernel=7, ffn=4,
                  hop=3200, latent=64, semantic=128),
}

FAMILY = Family(
    options=OPTIONS,
    name="VibeVoice",
    model_types=("vibevoice",),
    load=load,
    describe=describe,
    hub_models=(
        HubModel(
            "vibevoice/VibeVoice-1.5B-hf",
            "VibeVoice-1.5B (transformers layout): speakers 0..3, diffusion head + sigma-VAE codec in the "
            "LM loop, CFG 1.3, --seed for the noise",
            "vibevoice-1.5b",
        ),
    ),
    demos=(
        Demo(
            "demo-vibevoice",
            build_demo,
            version="1",
            recipe="demo-vibevoice",
            description="tiny random VibeVoice (diffusion head + codec in the LM loop, CFG 1.3), offline; "
                        "not speech",
        ),
    ),
    voices=VOICES,
    tiny=(Tiny("vibevoice", build_tiny, tiny_sizes, options=("max_new_tokens", "dtype")),),
    calibration=calibration,
    reference=reference,
    # 24 kHz PCM, 3200 samples (133 ms) per frame; the engine's "codes" of a frame are its samples (spec.py)
    sim=SimSpec(
        sample_rate=24000,
        frame_rate=7.5,
        samples_per_frame=3200,
        codebooks=3200,
        chunk=DEFAULT_CHUNKS,
        models=(SimModel("vibevoice-1.5b", VIBEVOICE_15B, gpu_profile="{gpu}-vibevoice-1.5b"),),
    ),
)
