"""Dia (Nari Labs) as a registered family (see models/registry.py). Imports nothing heavy: the program and
the demo builder load when first used."""

from __future__ import annotations

from ..base import ChunkSchedule
from ..codecs.dac.config import decoder_lookahead_frames
from ..registry import Demo, Entry, Family, HubModel, SimModel, SimSpec, Tiny

# Dia-1.6B's published dimensions (config.json of nari-labs/Dia-1.6B-0626 = transformers' DiaConfig
# defaults) and the DAC 44.1 kHz decoder's (descript/dac_44khz: decoder width 1536, upsampling 8, 8, 4, 2).
DIA_1_6B = {
    "encoder": dict(hidden=1024, layers=12, heads=16, kv_heads=16, head_dim=128, mlp=4096, vocab=256,
                    max_tokens=1024),
    "decoder": dict(hidden=2048, layers=18, heads=16, kv_heads=4, head_dim=128, mlp=8192, channels=9,
                    vocab=1028, cross_heads=16, cross_kv_heads=16, cross_head_dim=128, max_delay=15),
    "dac": dict(hidden=1536, rates=(8, 8, 4, 2), codebooks=9, codebook_dim=8, latent=1024, hop=512),
}

# Dia has no named voices (the voice comes from the text's [S1]/[S2] speakers or a reference clip):
# no OpenAI voice mapping, so `vox serve` takes every OpenAI name as the model's default voice.
FAMILY = Family(
    name="Dia",
    model_types=("dia",),
    load=Entry("models.dia.program:DiaProgram.load"),
    describe=Entry("models.dia.spec:describe"),
    tiny=(Tiny("dia", Entry("models.dia.tiny:build_tiny"), Entry("models.dia.tiny:SIZES")),),
    calibration=Entry("models.dia.sim:CALIBRATION"),
    profile_ops=Entry("models.dia.profile_ops:profile_ops"),
    hub_models=(
        HubModel("nari-labs/Dia-1.6B-0626", "English dialogue ([S1]/[S2]) with CFG; voice clone from "
                 "--ref-audio + --ref-text", "dia-1.6b"),
    ),
    # Random weights almost never pick EOS: max_length bounds a request (256 frames, about 3 s).
    demos=(Demo("demo-dia", Entry("models.dia.tiny:build_tiny", size="tiny", max_length=258), version="1",
                recipe="demo-dia",
                description="tiny random Dia (dialogue, CFG), offline; its audio is not speech"),),
    # 44.1 kHz PCM, 512 samples (11.6 ms) per frame, 9 codebooks; the recipe's chunk schedule.
    sim=SimSpec(sample_rate=44100, frame_rate=44100 / 512, samples_per_frame=512, codebooks=9,
                chunk=ChunkSchedule(first=12, ramp=(24,), steady=48),
                models=(SimModel("dia-1.6b", DIA_1_6B, gpu_profile="{gpu}-dia-1.6b"),),
                cfg_scale=3.0,  # generation_config.json's guidance_scale: every request is a pair
                lead_steps=15,  # max(delay): the first aligned frame comes 15 steps after the first
                # dac_44khz's decoder right context: 4757 samples = 9.29 frames
                codec_lookahead_frames=decoder_lookahead_frames((8, 8, 4, 2))),
)
