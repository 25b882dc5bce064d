"""CosyVoice 3 as a registered family (see models/registry.py). Imports nothing heavy: the program and
the demo builder load when first used. Its checkpoints carry `cosyvoice3.yaml`, not a transformers
config.json (`Family.claims`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..base import ChunkSchedule
from ..flowlm.options import OPTIONS
from ..registry import Demo, Family, HubModel, SimModel, SimSpec, Tiny


def describe(path: str) -> Any:
    from .spec import describe as from_files

    return from_files(path)


def load(path: str, device: str = "cpu", dtype: str = "float32") -> Any:
    from .program import CosyVoice3Program

    return CosyVoice3Program.load(path, device=device, dtype=dtype)


def build_demo(out: Path) -> None:
    from .tiny import build_tiny

    build_tiny(out, size="tiny")


def build_tiny(out: Path, size: str = "tiny", seed: int | None = None, clone_models: bool = False,
               **options: Any) -> Path:
    """Upstream's layout; `clone_models` adds tiny random speech_tokenizer_v3.onnx and campplus.onnx
    (needs `onnx`) so that --ref-audio runs."""
    from .tiny import SEED
    from .tiny import build_tiny as build

    seed = SEED if seed is None else seed
    folder = build(out, size=size, seed=seed, **options)
    if clone_models:
        from ..flowlm.tiny_onnx import write_tiny_onnx

        write_tiny_onnx(folder, seed=seed)
    return folder


def tiny_sizes() -> tuple[str, ...]:
    from .tiny import SIZES

    return tuple(SIZES)


def calibration() -> Any:
    from .sim import CALIBRATION

    return CALIBRATION


# Fun-CosyVoice3-0.5B's published dimensions (its cosyvoice3.yaml): LM = Qwen2-0.5B; flow = a DiT of
# dim 1024 x depth 22 (16 heads of 64), 10 Euler steps with CFG (2 rows); HiFT with 512 base channels.
COSYVOICE3_0_5B = {
    "lm": dict(hidden=896, layers=24, heads=14, kv_heads=2, head_dim=64, mlp=4864, vocab=6761),
    "dit": dict(dim=1024, depth=22, heads=16, dim_head=64, ff_mult=2, steps=10, cfg_rows=2, block=50),
    "hift": dict(base=512, upsample=(8, 5, 3), hop=480),
    "token_mel_ratio": 2,
}

FAMILY = Family(
    options=OPTIONS,
    name="CosyVoice 3",
    model_types=("cosyvoice3",),
    load=load,
    # Its voices are whatever spk2info.pt holds (no names common to its checkpoints): no OpenAI voice
    # mapping, so an OpenAI name gets the model's 400 that lists its voices.
    tiny=(Tiny("cosyvoice3", build_tiny, tiny_sizes, options=("clone_models",)),),
    calibration=calibration,
    hub_models=(
        HubModel(
            "FunAudioLLM/Fun-CosyVoice3-0.5B-2512",
            "zero-shot voices saved in spk2info.pt, English frontend; flow-matching DiT codec (codec-heavy)",
            "cosyvoice3-0.5b",
        ),
    ),
    demos=(
        Demo(
            "demo-cosyvoice",
            build_demo,
            version="1",
            recipe="demo-cosyvoice",
            description="tiny random CosyVoice 3 (DiT flow + HiFT), offline; its audio is not speech",
        ),
    ),
    # 25 Hz speech tokens, 960 samples (two 50 Hz mel frames) each at 24 kHz; chunks = upstream's hops.
    sim=SimSpec(
        sample_rate=24000,
        frame_rate=25.0,
        samples_per_frame=960,
        codebooks=1,
        chunk=ChunkSchedule(first=28, ramp=(50,), steady=100),
        # a hop's tokens need 3 more of look-ahead (flow pre_lookahead_len) and the vocoder keeps its last
        # 8 mel frames (= 4 tokens at 2 mel frames per token) for the next hop: 7 tokens held, on a
        # hop-aligned schedule like this one (codec.py docstring)
        codec_lookahead_frames=7.0,
        models=(SimModel("cosyvoice3-0.5b", COSYVOICE3_0_5B, gpu_profile="{gpu}-cosyvoice3-0.5b"),),
    ),
    claims=lambda root: (root / "cosyvoice3.yaml").is_file(),
    describe=describe,
    claim_file="cosyvoice3.yaml",
)
