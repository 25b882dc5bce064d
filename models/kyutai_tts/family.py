"""Kyutai TTS (delayed streams modeling, kyutai/tts-1.6b-en_fr through moshi 0.2.13) as a registered family
(see models/registry.py). Imports nothing heavy: the program, the builders and Mimi load when first used."""

from __future__ import annotations

from ..registry import Demo, Entry, Family, HubModel, SimModel, SimSpec, Tiny
from .options import OPTIONS
from .spec import DEFAULT_CHUNKS

# kyutai/tts-1.6b-en_fr's published dimensions (config.json): the main transformer (16 layers, 2048 wide, 16
# heads of 128, hidden_scale 4.125 -> SiLU-gated MLP of 5632, text vocabulary 8000, a cross-attention per
# layer), the depformer (4 layers, 1024 wide, 16 heads, feed-forward 3072 -> gated 2048, 32 passes over 11
# weight sets, codebook heads of 2048), and Mimi's decoder (as CSM's), as sim.py reads them.
KYUTAI_TTS_1_6B = {
    "main": dict(hidden=2048, layers=16, heads=16, kv_heads=16, head_dim=128, mlp=5632, text_vocab=8000,
                 cross_heads=16, cross_head_dim=128),
    "depth": dict(hidden=1024, layers=4, heads=16, kv_heads=16, head_dim=64, mlp=2048, vocab=2048, passes=32,
                  main_hidden=2048),
    "codec": dict(hidden=512, layers=8, mlp=2048, filters=64, rates=(8, 6, 5, 4), codebooks=32, window=250),
}

FAMILY = Family(
    options=OPTIONS,
    name="Kyutai TTS",
    model_types=("tts",),
    load=Entry("models.kyutai_tts.program:KyutaiProgram.load"),
    describe=Entry("models.kyutai_tts.spec:describe"),
    hub_models=(
        HubModel(
            "kyutai/tts-1.6b-en_fr",
            "Kyutai TTS 1.6B (en, fr): delayed streams, text read word by word as it arrives; voices from "
            "kyutai/tts-voices (--voice NAME or a voice file); Mimi codec bundled",
            "kyutai-tts-1.6b",
        ),
    ),
    # the pure-torch builder (build.py: no moshi, streamed, tiny / bench / real); the parity tests build
    # through moshi's own classes with tiny.py instead
    tiny=(Tiny("kyutai_tts", Entry("models.kyutai_tts.build:build"),
               Entry("models.kyutai_tts.build:SIZES")),),
    demos=(
        Demo(
            "demo-kyutai",
            Entry("models.kyutai_tts.build:build", size="tiny"),
            version="1",
            recipe="demo-kyutai",
            description="tiny random Kyutai TTS (delayed streams, depformer, Mimi, two voices), offline; "
            "its audio is not speech",
        ),
    ),
    reference=Entry("models.kyutai_tts.reference"),
    calibration=Entry("models.kyutai_tts.sim:CALIBRATION"),
    # 24 kHz PCM, 1920 samples (80 ms) per frame, 32 codebooks; Mimi is causal. The first frame comes after
    # the audio delay (16 steps) plus the acoustic codebooks' delay (2).
    sim=SimSpec(
        sample_rate=24000,
        frame_rate=12.5,
        samples_per_frame=1920,
        codebooks=32,
        chunk=DEFAULT_CHUNKS,
        lead_steps=18,
        streams_text=True,  # words are fed as they arrive (the TEXT_STREAM mode in spec.py)
        models=(SimModel("kyutai-tts-1.6b", KYUTAI_TTS_1_6B, gpu_profile="{gpu}-kyutai-tts-1.6b"),),
    ),
)
