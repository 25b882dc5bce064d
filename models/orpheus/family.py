"""Orpheus 3B (canopylabs) as a registered family (see models/registry.py). Imports nothing heavy: the
program, the builders and the sim arithmetic load when first used."""

from __future__ import annotations

from ..base import ChunkSchedule
from ..registry import Demo, Entry, Family, HubModel, SimModel, SimSpec, Tiny
from .options import OPTIONS
from .tokens import VOICES

# canopylabs/orpheus-3b-0.1-ft = Llama-3.2-3B; hubertsiuzdak/snac_24khz (models/orpheus/sim.py reads these).
ORPHEUS_3B = {
    "lm": dict(hidden=3072, layers=28, heads=24, kv_heads=8, head_dim=128, mlp=8192, vocab=156940),
    "snac": dict(latent=768, hidden=1024, rates=(8, 8, 4, 2), codebook_dim=8, latent_steps=4),
}

# OpenAI's voices -> Orpheus's (tara, leah, jess, mia, zoe are female; leo, dan, zac male), by character.
OPENAI_VOICES: dict[str, tuple[str, ...]] = {
    "alloy": ("tara", "leah"),
    "ash": ("dan", "leo"),
    "ballad": ("leo", "zac"),
    "coral": ("jess", "mia"),
    "echo": ("leo", "dan"),
    "fable": ("zac", "leo"),
    "nova": ("mia", "jess"),
    "onyx": ("dan", "leo"),
    "sage": ("leah", "tara"),
    "shimmer": ("zoe", "jess"),
    "verse": ("zac", "dan"),
}

FAMILY = Family(
    name="Orpheus",
    model_types=("llama",),
    load=Entry("models.orpheus.program:OrpheusProgram.load"),
    describe=Entry("models.orpheus.spec:describe"),
    voices=VOICES,
    openai_voices=OPENAI_VOICES,
    options=OPTIONS,
    tiny=(Tiny("orpheus", Entry("models.orpheus.tiny:build_tiny"), Entry("models.orpheus.tiny:SIZES")),),
    calibration=Entry("models.orpheus.sim:CALIBRATION"),
    hub_models=(
        HubModel(
            "canopylabs/orpheus-3b-0.1-ft",
            "English TTS, 8 voices, emotive tags (<laugh>, <sigh>...); "
            "SNAC 24 kHz from hubertsiuzdak/snac_24khz",
            "orpheus-3b",
        ),
    ),
    demos=(
        Demo(
            "demo-orpheus",
            Entry("models.orpheus.tiny:build_tiny", size="tiny"),
            version="1",
            recipe="demo-orpheus",
            description="tiny random Orpheus (8 voices, SNAC), offline; its audio is not speech",
        ),
    ),
    # 24 kHz PCM, 2048 samples (85.3 ms) a frame, 7 codes a frame. The sim's step is a frame of 7 LM steps
    # (models/orpheus/sim.py); the "whole" SNAC mode holds back 3 frames (models/orpheus/codec.py).
    sim=SimSpec(
        sample_rate=24000,
        frame_rate=24000 / 2048,
        samples_per_frame=2048,
        codebooks=7,
        chunk=ChunkSchedule(first=4, ramp=(1, 2, 4, 8), steady=16),
        models=(SimModel("orpheus-3b", ORPHEUS_3B, gpu_profile="{gpu}-orpheus-3b"),),
        codec_lookahead_frames=3.0,
    ),
)
