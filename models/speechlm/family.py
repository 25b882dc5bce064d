"""ESPnet SpeechLM unified LMs (Bagpiper, OpusLM) as a registered family (see models/registry.py).

Their checkpoints have no config.json of their own: the family claims a folder (or a cached hub snapshot)
holding one train*.yaml, inference.yaml and model.pt. Imports nothing heavy."""

from __future__ import annotations

from ..base import ChunkSchedule
from ..codecs.dac.config import decoder_lookahead_frames
from ..registry import Demo, Entry, Family, HubModel, SimModel, SimSpec, Tiny
from .options import OPTIONS

# Published sizes. Backbones: Qwen/Qwen3-8B-Base and allenai/OLMo-2-1124-7B config.json. Unified vocabulary
# (speechlm_job.py's layout): 256 specials + the text vocabulary + 1025 per audio stream (codebook + pad);
# Bagpiper 256 + 151936 + 8 x 1025 = 160392 (the seed's SpeechLMConfig); OpusLM's SSL k-means size is not
# published in the wheel: assumed 1024 like its DAC codebooks. Codec: X-Codec's acoustic decoder
# (hf-audio/xcodec-hubert-general: width 1024, upsampling 8, 5, 4, 2, latent 256, fc2 from 256 + 768).
XCODEC = dict(hidden=1024, rates=(8, 5, 4, 2), latent=256, fc2_in=1024, hop=320)
BAGPIPER_8B = {"backbone": dict(hidden=4096, layers=36, heads=32, kv_heads=8, head_dim=128, mlp=12288),
               "vocab": 256 + 151936 + 8 * 1025, "text_vocab": 151936, "streams": 8, "codec": XCODEC}
OPUSLM_7B = {"backbone": dict(hidden=4096, layers=32, heads=32, kv_heads=32, head_dim=128, mlp=11008),
             "vocab": 256 + 100352 + 9 * 1025, "text_vocab": 100352, "streams": 9, "codec": XCODEC}

# No named voices (the text plan and a reference clip make the voice): no OpenAI voice mapping, so
# `vox serve` takes every OpenAI name as the model's default voice.
FAMILY = Family(
    options=OPTIONS,
    describe=Entry("models.speechlm.spec:describe"),
    name="ESPnet SpeechLM (unified text+audio)",
    model_types=(),
    load=Entry("models.speechlm.program:SpeechLMProgram.load"),
    # OpusLM-like, ESPnet's release layout; sizes hear-tiny / hear-real: Bagpiper-like, it hears
    tiny=(Tiny("speechlm", Entry("models.speechlm.tiny_sizes:build_sized"),
               Entry("models.speechlm.tiny_sizes:SIZES")),),
    calibration=Entry("models.speechlm.sim:CALIBRATION"),
    claims=Entry("models.speechlm.config:is_speechlm_dir"),
    claim_file="inference.yaml",
    hub_models=(
        HubModel("espnet/bagpiper-tts-sft", "Bagpiper TTS (Qwen3-8B, 8 X-Codec streams): writes a text plan, "
                 "then speaks; CFG 3", "bagpiper-8b"),
    ),
    demos=(Demo("demo-speechlm", Entry("models.speechlm.tiny:build_tiny"), version="2",
                recipe="demo-speechlm",
                description="tiny random unified text+audio LM (Bagpiper-like: text phase, then audio; CFG; "
                            "hears through X-Codec's encoder), offline; neither its text nor its audio is "
                            "language"),),
    # X-Codec / OpusLM's DAC: 16 kHz, 320 samples (20 ms) per frame, 8 codec streams.
    sim=SimSpec(sample_rate=16000, frame_rate=50.0, samples_per_frame=320, codebooks=8,
                # a 10-frame second chunk: 25 frames after the first 10 must come within 10 frames of
                # playback (200 ms), which an 8B step of >= 8 ms at a few pairs cannot (the sim stalled)
                chunk=ChunkSchedule(first=10, ramp=(10, 25), steady=50),
                models=(SimModel("bagpiper-8b", BAGPIPER_8B, gpu_profile="{gpu}-bagpiper-8b"),
                        # OpusLM decodes with ESPnet's DAC: 5 frames held back (espnet_dac_stream.py)
                        SimModel("opuslm-7b", OPUSLM_7B, gpu_profile="{gpu}-opuslm-7b",
                                 codec_lookahead_frames=5.0)),
                cfg_scale=3.0,  # Bagpiper's inference config: every request is a pair in its audio phase
                # frameless steps before the first frame: the delay fill (7) and the optimistic assumed
                # 64-token text plan (CoT + rich caption; nothing publishes its length; the pessimistic 256
                # and the TTFA floors are in sim.py and the profiles' headers)
                lead_steps=7 + 64,
                # X-Codec's decoder right context over its upsampling 8, 5, 4, 2: 3141 samples = 9.82 frames
                codec_lookahead_frames=decoder_lookahead_frames((8, 5, 4, 2))),
)
