"""CSM-1B (Sesame) as a registered family (see models/registry.py). Imports nothing heavy: the program, the
builders and the Mimi codec load when first used."""

from __future__ import annotations

from ..registry import Demo, Entry, Family, HubModel, SimModel, SimSpec, Tiny
from .options import OPTIONS
from .spec import DEFAULT_CHUNKS, VOICES

# CSM-1B's published dimensions (sesame/csm-1b config.json): a Llama-3.2-1B backbone (16 layers, 2048 wide,
# 32 / 8 heads of 64, MLP 8192, text vocabulary 128256, audio head 2051), the 100M depth decoder (4 layers,
# 1024 wide, 8 / 2 heads of 128, MLP 8192, run for codebooks 1..31 of every frame), and Mimi's decoder
# (512-wide 8-layer transformer at 25 Hz, SEANet 64 filters, ratios 8, 6, 5, 4), as sim.py reads them.
CSM_1B = {
    "backbone": dict(
        hidden=2048, layers=16, heads=32, kv_heads=8, head_dim=64, mlp=8192, vocab=2051, text_vocab=128256
    ),
    "depth": dict(
        hidden=1024,
        layers=4,
        heads=8,
        kv_heads=2,
        head_dim=128,
        mlp=8192,
        vocab=2051,
        passes=31,
        backbone_hidden=2048,
    ),
    "codec": dict(hidden=512, layers=8, mlp=2048, filters=64, rates=(8, 6, 5, 4), codebooks=32, window=250),
}

# Speakers are numbers: "0" and "1" are the two sides of the conversations CSM was trained on; the OpenAI
# names alternate between them (CSM's speakers have no published character).
OPENAI_VOICES: dict[str, tuple[str, ...]] = {
    name: (first, "1" if first == "0" else "0")
    for name, first in (
        ("alloy", "0"),
        ("ash", "1"),
        ("ballad", "1"),
        ("coral", "0"),
        ("echo", "1"),
        ("fable", "0"),
        ("nova", "0"),
        ("onyx", "1"),
        ("sage", "0"),
        ("shimmer", "0"),
        ("verse", "1"),
    )
}

FAMILY = Family(
    options=OPTIONS,
    name="CSM",
    model_types=("csm",),
    load=Entry("models.csm.program:CsmProgram.load"),
    describe=Entry("models.csm.spec:describe"),
    hub_models=(
        HubModel(
            "sesame/csm-1b",
            "CSM-1B: speakers 0..9 (--voice), voice clone as a context turn "
            "(--ref-audio + --ref-text); Mimi codec bundled",
            "csm-1b",
        ),
    ),
    voices=VOICES,
    openai_voices=OPENAI_VOICES,
    tiny=(Tiny("csm", Entry("models.csm.tiny:build_tiny"), Entry("models.csm.tiny:SIZES"),
               options=("max_new_tokens", "dtype", "calibrate")),),
    calibration=Entry("models.csm.sim:CALIBRATION"),
    reference=Entry("models.csm.reference"),
    demos=(
        Demo(
            "demo-csm",
            Entry("models.csm.tiny:build_tiny", size="tiny", max_new_tokens=200),
            version="1",
            recipe="demo-csm",
            description="tiny random CSM (depth decoder, Mimi codec), offline; its audio is not speech",
        ),
    ),
    # 24 kHz PCM, 1920 samples (80 ms) per frame, 32 codebooks; Mimi is causal (no look-ahead).
    sim=SimSpec(
        sample_rate=24000,
        frame_rate=12.5,
        samples_per_frame=1920,
        codebooks=32,
        chunk=DEFAULT_CHUNKS,
        models=(SimModel("csm-1b", CSM_1B, gpu_profile="{gpu}-csm-1b"),),
    ),
)
