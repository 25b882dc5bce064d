"""CosyVoice 3 as a registered family (see models/registry.py). Imports nothing heavy: the program and
the demo builder load when first used. Its checkpoints carry `cosyvoice3.yaml`, not a transformers
config.json (`Family.claims`)."""

from __future__ import annotations

from ..base import ChunkSchedule
from ..flowlm.options import OPTIONS
from ..registry import Demo, Entry, Family, HubModel, SimModel, SimSpec, Tiny

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
    load=Entry("models.cosyvoice3.program:CosyVoice3Program.load"),
    # Its voices are whatever spk2info.pt holds (no names common to its checkpoints): no OpenAI voice
    # mapping, so an OpenAI name gets the model's 400 that lists its voices.
    tiny=(Tiny("cosyvoice3", Entry("models.cosyvoice3.tiny:build_tiny"),
               Entry("models.cosyvoice3.tiny:SIZES"), options=("clone_models",)),),
    calibration=Entry("models.cosyvoice3.sim:CALIBRATION"),
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
            Entry("models.cosyvoice3.tiny:build_tiny", size="tiny"),
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
    claims=Entry("models.cosyvoice3.spec:claims"),
    describe=Entry("models.cosyvoice3.spec:describe"),
    claim_file="cosyvoice3.yaml",
)
