"""CosyVoice 2 as a registered family (see models/registry.py). Imports nothing heavy. Its checkpoints
carry `cosyvoice2.yaml`, not a transformers config.json (`Family.claims`).

Layout: this package holds what is CosyVoice 2's own (config, Qwen2LM ends, the conformer encoder, the
UNet estimator, HiFTGenerator with per-call noise, the codec's hift cache, tiny builder, sim profile);
the parts upstream's CosyVoice models share come from the library, models/flowlm (the paged Qwen2
backbone, ras sampling, the English frontend and tokenizer, the zero-shot speaker format, the hop schedule
and the program's request handling) and models/codecs/hift (the vocoder's shared parts).
"""

from __future__ import annotations

from ..base import ChunkSchedule
from ..flowlm.options import OPTIONS
from ..registry import Demo, Entry, Family, HubModel, SimModel, SimSpec, Tiny

# CosyVoice2-0.5B's published dimensions (its cosyvoice2.yaml): LM = Qwen2-0.5B; flow = a 512-wide
# conformer encoder (6 + 4 layers, 8 heads, FFN 2048) and a 1-D UNet of 256 channels (1 down + 12 mid + 1
# up level, 4 transformer blocks each, 8 heads of 64), 10 Euler steps with CFG (2 rows); HiFT 512 base.
COSYVOICE2_0_5B = {
    "lm": dict(hidden=896, layers=24, heads=14, kv_heads=2, head_dim=64, mlp=4864, vocab=6564),
    "encoder": dict(dim=512, layers=10, up_layers=4, heads=8, ffn=2048),
    "unet": dict(channels=256, levels=14, blocks=4, heads=8, head_dim=64, steps=10, cfg_rows=2, block=50),
    "hift": dict(base=512, upsample=(8, 5, 3), hop=480),
    "token_mel_ratio": 2,
}

FAMILY = Family(
    options=OPTIONS,
    name="CosyVoice 2",
    model_types=("cosyvoice2",),
    load=Entry("models.cosyvoice2.program:CosyVoice2Program.load"),
    describe=Entry("models.cosyvoice2.spec:describe"),
    # CosyVoice2-0.5B ships no spk2info.pt (upstream issue #729): its voices are the zero-shot speakers a
    # deployment saves, or CosyVoice-300M's SFT speakers (embedding only, read as upstream's inference_sft
    # reads them), whose English ones the OpenAI names map to by the voice's character.
    voices=("中文女", "中文男", "日语男", "粤语女", "英文女", "英文男", "韩语女"),  # CosyVoice-300M's SFT set
    openai_voices={
        **dict.fromkeys(("alloy", "coral", "nova", "sage", "shimmer"), ("英文女",)),
        **dict.fromkeys(("ash", "ballad", "echo", "fable", "onyx", "verse"), ("英文男",)),
    },
    tiny=(Tiny("cosyvoice2", Entry("models.cosyvoice2.tiny:build_tiny"),
               Entry("models.cosyvoice2.tiny:SIZES"), options=("clone_models",)),),
    calibration=Entry("models.cosyvoice2.sim:CALIBRATION"),
    hub_models=(
        HubModel(
            "FunAudioLLM/CosyVoice2-0.5B",
            "zero-shot voices saved in spk2info.pt or a cloned clip; flow-matching UNet codec (codec-heavy)",
            "cosyvoice2-0.5b",
        ),
    ),
    demos=(
        Demo(
            "demo-cosyvoice2",
            Entry("models.cosyvoice2.tiny:build_tiny", size="tiny"),
            version="1",
            recipe="demo-cosyvoice2",
            description="tiny random CosyVoice 2 (conformer + UNet flow, HiFT), offline; not speech",
        ),
    ),
    # 25 Hz speech tokens, 960 samples (two 50 Hz mel frames) each at 24 kHz; chunks = upstream's hops.
    sim=SimSpec(
        sample_rate=24000,
        frame_rate=25.0,
        samples_per_frame=960,
        codebooks=1,
        chunk=ChunkSchedule(first=28, ramp=(50,), steady=100),
        # a hop's tokens need 3 more of look-ahead, and the vocoder holds back its last 8 mel frames
        # (3840 samples = 4 tokens) for the next call's cross-fade: 7 tokens held
        codec_lookahead_frames=7.0,
        models=(SimModel("cosyvoice2-0.5b", COSYVOICE2_0_5B, gpu_profile="{gpu}-cosyvoice2-0.5b"),),
    ),
    claims=Entry("models.cosyvoice2.spec:claims"),
    claim_file="cosyvoice2.yaml",
)
