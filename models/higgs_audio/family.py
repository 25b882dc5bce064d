"""Higgs Audio (Boson AI) as a registered family (see models/registry.py). Imports nothing heavy: the program
and the demo builder load when first used."""

from __future__ import annotations

from ..base import ChunkSchedule
from ..codecs.dac.config import decoder_lookahead_frames
from ..registry import Demo, Entry, Family, HubModel, SimModel, SimSpec, Tiny

# Higgs Audio v3 4B's published dimensions (bosonai/higgs-audio-v3-tts-4b: Qwen3-4B backbone, the tied
# fused 8 x 1026 audio head) and the v2 audio tokenizer's decoder it bundles (DAC 1024 wide over a 256
# latent, ratios 8, 5, 4, 2, 3; 8 codebooks of 64 into a 1024-wide RVQ space), as
# sim.py reads them.
HIGGS_V3_4B = {
    "backbone": dict(
        hidden=2560, layers=36, heads=32, kv_heads=8, head_dim=128, mlp=9728, codebooks=8, vocab=1026
    ),
    "codec": dict(
        hidden=1024, latent=256, rates=(8, 5, 4, 2, 3), codebooks=8, codebook_dim=64, rvq_hidden=1024, hop=960
    ),
}

# Higgs Audio has no named voices (a reference clip or the text's description makes the voice): no
# OpenAI voice mapping, so `vox serve` takes every OpenAI name as the model's default voice.
FAMILY = Family(
    name="Higgs Audio",
    model_types=("higgs_audio_v2", "higgs_audio", "higgs_multimodal_qwen3"),
    load=Entry("models.higgs_audio.program:HiggsProgram.load"),
    describe=Entry("models.higgs_audio.spec:describe"),
    # the transformers layout of v2 and the v3 layout (models/higgs_audio/tiny.py); "real": the released size
    tiny=(Tiny("higgs", Entry("models.higgs_audio.tiny:build_sized", family="higgs"),
               Entry("models.higgs_audio.tiny:SIZES"), options=("max_new_tokens",), more_sizes=("real",)),
          Tiny("higgs-v3", Entry("models.higgs_audio.tiny:build_sized", family="higgs-v3"),
               Entry("models.higgs_audio.tiny:V3_SIZES"), options=("max_new_tokens",), more_sizes=("real",))),
    calibration=Entry("models.higgs_audio.sim:CALIBRATION"),
    hub_models=(
        HubModel(
            "eustlb/higgs-audio-v2-generation-3B-base",
            "Higgs Audio v2 3B, transformers layout; --instructions sets the scene description",
            "higgs-v2-3b",
        ),
        HubModel(
            "bosonai/higgs-audio-v2-generation-3B-base",
            "Higgs Audio v2 3B, the original release's layout (needs bosonai/higgs-audio-v2-tokenizer)",
            "higgs-v2-3b",
        ),
        HubModel(
            "bosonai/higgs-audio-v3-tts-4b",
            "Higgs Audio v3 4B (Qwen3 backbone, codec bundled)",
            "higgs-v3-4b",
        ),
    ),
    demos=(
        Demo(
            "demo-higgs",
            # Random weights never pick the stream EOS (tiny.py): max_new_tokens bounds a request
            # (192 frames, 7.7 s).
            Entry("models.higgs_audio.tiny:build_tiny", size="tiny", max_new_tokens=200),
            version="2",
            recipe="demo-higgs",
            description="tiny random Higgs Audio v2 (delay pattern, DAC codec), offline; its audio is not "
            "speech",
        ),
    ),
    # 24 kHz PCM, 960 samples (40 ms) per frame, 8 codebooks; the recipe's chunk schedule (first chunk set by
    # the codec's 9.85-frame look-ahead, codec.py: its 15 frames release 206 ms of audio, so the second chunk
    # is small, 10 frames, to arrive before that plays out).
    sim=SimSpec(
        sample_rate=24000,
        frame_rate=25.0,
        samples_per_frame=960,
        codebooks=8,
        chunk=ChunkSchedule(first=15, ramp=(10, 25), steady=50),
        models=(SimModel("higgs-v3-4b", HIGGS_V3_4B, gpu_profile="{gpu}-higgs-v3-4b"),),
        lead_steps=8,  # the delay fill: the first aligned frame comes 8 steps after the first step
        # the released tokenizer's decoder right context: 9458 samples = 9.85 frames (codec.py docstring)
        codec_lookahead_frames=decoder_lookahead_frames((8, 5, 4, 2, 3)),
    ),
)
