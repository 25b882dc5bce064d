"""ESPnet SpeechLM unified LMs (Bagpiper, OpusLM) as a registered family (see models/registry.py).

Their checkpoints have no config.json of their own: the family claims a folder (or a cached hub snapshot)
holding one train*.yaml, inference.yaml and model.pt. Imports nothing heavy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..base import ChunkSchedule
from ..codecs.dac.config import decoder_lookahead_frames
from ..registry import Demo, Family, HubModel, SimModel, SimSpec, Tiny
from .options import OPTIONS


def describe(path: str) -> Any:
    from .spec import describe as from_config

    return from_config(path)


def load(path: str, device: str = "cpu", dtype: str = "float32") -> Any:
    from .program import SpeechLMProgram

    return SpeechLMProgram.load(path, device=device, dtype=dtype)


def build_demo(out: Path) -> None:
    from .tiny import build_tiny

    build_tiny(out)


def claims(path: Path) -> bool:
    from .config import is_speechlm_dir

    return is_speechlm_dir(path)


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

def build_tiny(out: Path, size: str = "tiny", seed: int | None = None, **options: Any) -> Path:
    from .tiny_opuslm import build_opuslm

    if size.startswith("hear-"):
        return build_hearing(out, size[len("hear-"):], seed)

    return build_opuslm(Path(out), size=size, seed=0 if seed is None else seed, **options)


def build_hearing(out: Path, size: str = "tiny", seed: int | None = None) -> Path:
    """Bagpiper's layout (X-Codec streams, audio input through its encoder): tiny, or real (real_hearing.py:
    SmolLM2-1.7B's backbone with the released X-Codec's sizes)."""
    if size == "real":
        from .real_hearing import build_real_hearing

        return build_real_hearing(Path(out), seed=0 if seed is None else seed)
    if size != "tiny":
        raise ValueError(f"the hearing sizes are hear-tiny and hear-real, not hear-{size}")
    from .tiny import build_tiny as build

    return build(Path(out), seed=0 if seed is None else seed)


def tiny_sizes() -> tuple[str, ...]:
    from .tiny_opuslm import SIZES

    return (*SIZES, "hear-tiny", "hear-real")


def calibration() -> Any:
    from .sim import CALIBRATION

    return CALIBRATION


# No named voices (the text plan and a reference clip make the voice): no OpenAI voice mapping, so
# `vox serve` takes every OpenAI name as the model's default voice.
FAMILY = Family(
    options=OPTIONS,
    describe=describe,
    name="ESPnet SpeechLM (unified text+audio)",
    model_types=(),
    load=load,
    # OpusLM-like, ESPnet's release layout; sizes hear-tiny / hear-real: Bagpiper-like, it hears
    tiny=(Tiny("speechlm", build_tiny, tiny_sizes),),
    calibration=calibration,
    claims=claims,
    claim_file="inference.yaml",
    hub_models=(
        HubModel("espnet/bagpiper-tts-sft", "Bagpiper TTS (Qwen3-8B, 8 X-Codec streams): writes a text plan, "
                 "then speaks; CFG 3", "bagpiper-8b"),
    ),
    demos=(Demo("demo-speechlm", build_demo, version="2", recipe="demo-speechlm",
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
