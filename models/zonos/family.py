"""Zonos v0.1 (Zyphra) as a registered family (see models/registry.py). Imports nothing heavy: the program,
the demo and tiny builders and the sim profile load when first used.

Only the transformer variant is served (Zyphra/Zonos-v0.1-transformer): the hybrid's Mamba2 layers need
mamba-ssm's CUDA kernels, and its config.json is refused in one sentence (config.py)."""

from __future__ import annotations

from ..registry import Demo, Entry, Family, HubModel, SimModel, SimSpec, Tiny
from .options import OPTIONS
from .spec import DAC_RATIOS, DEFAULT_CHUNKS, HOP, SAMPLE_RATE

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
    load=Entry("models.zonos.program:ZonosProgram.load"),
    describe=Entry("models.zonos.spec:describe"),
    claims=Entry("models.zonos.spec:claims"),
    tiny=(Tiny("zonos", Entry("models.zonos.tiny:build_tiny"), Entry("models.zonos.tiny:SIZES")),),
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
            Entry("models.zonos.tiny:build_tiny", size="tiny"),
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
    calibration=Entry("models.zonos.sim:CALIBRATION"),
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
