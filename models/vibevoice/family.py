"""VibeVoice (Microsoft, transformers layout) as a registered family (see models/registry.py). Imports
nothing heavy: the program, the builders and the reference load when first used."""

from __future__ import annotations

from ..registry import Demo, Entry, Family, HubModel, SimModel, SimSpec, Tiny
from .options import OPTIONS
from .spec import DEFAULT_CHUNKS, VOICES

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
    load=Entry("models.vibevoice.program:VibeVoiceProgram.load"),
    describe=Entry("models.vibevoice.spec:describe"),
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
            # drawn and calibrated in this interpreter (no transformers)
            Entry("models.vibevoice.tiny:build_tiny", size="tiny"),
            version="1",
            recipe="demo-vibevoice",
            description="tiny random VibeVoice (diffusion head + codec in the LM loop, CFG 1.3), offline; "
                        "not speech",
        ),
    ),
    voices=VOICES,
    tiny=(Tiny("vibevoice", Entry("models.vibevoice.tiny:build_tiny"), Entry("models.vibevoice.tiny:SIZES"),
               options=("max_new_tokens", "dtype")),),
    calibration=Entry("models.vibevoice.sim:CALIBRATION"),
    reference=Entry("models.vibevoice.reference"),
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
