"""Qwen3-TTS 12 Hz as a registered family (see models/registry.py). Imports nothing heavy: the program
and the demo builder load when first used."""

from __future__ import annotations

from ..base import ChunkSchedule
from ..registry import Demo, Entry, Family, HubModel, SimModel, SimSpec, Tiny
from .options import OPTIONS
from .sizes import SPEAKERS

# CustomVoice's nine speakers (the demo has five of them)
VOICES = tuple(SPEAKERS)
# OpenAI voice -> these speakers by the OpenAI voice's character (female / male, deep, bright), best first.
OPENAI_VOICES: dict[str, tuple[str, ...]] = {
    "alloy": ("vivian", "serena"),
    "ash": ("ryan", "aiden", "eric", "dylan"),
    "ballad": ("aiden", "ryan", "dylan"),
    "coral": ("serena", "vivian"),
    "echo": ("ryan", "eric", "aiden"),
    "fable": ("aiden", "dylan", "ryan"),
    "nova": ("vivian", "serena"),
    "onyx": ("uncle_fu", "ryan", "eric"),
    "sage": ("serena", "vivian", "sohee"),
    "shimmer": ("sohee", "ono_anna", "vivian"),
    "verse": ("eric", "ryan", "dylan"),
}


def _sizes(hidden: int, mlp: int) -> dict[str, dict[str, int]]:
    """Dimensions the cost model reads (design notes, qwen3-tts-notes.md; as in
    models/qwen3_tts/sizes.py):
    the talker (28 layers) and the depth transformer ("predictor": 5 layers, run 15 times per frame)."""
    return {
        "talker": dict(hidden=hidden, layers=28, heads=16, kv_heads=8, head_dim=128, mlp=mlp,
                       codec_vocab=3072),
        "predictor": dict(hidden=1024, layers=5, heads=16, kv_heads=8, head_dim=128, mlp=3072, vocab=2048,
                          passes=15, talker_hidden=hidden),
    }


FAMILY = Family(
    options=OPTIONS,
    name="Qwen3-TTS 12 Hz",
    model_types=("qwen3_tts",),
    load=Entry("models.qwen3_tts.program:Qwen3TTSProgram.load"),
    describe=Entry("models.qwen3_tts.spec:describe"),
    hub_models=(
        HubModel("Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice", "9 built-in voices, 10 languages", "qwen3-tts-0.6b"),
        HubModel("Qwen/Qwen3-TTS-12Hz-0.6B-Base", "voice clone from --ref-audio", "qwen3-tts-0.6b"),
        HubModel("Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice", "9 built-in voices + style instructions",
                 "qwen3-tts-1.7b"),
        HubModel("Qwen/Qwen3-TTS-12Hz-1.7B-Base", "voice clone from --ref-audio", "qwen3-tts-1.7b"),
        HubModel("Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign", "a voice described by --instructions",
                 "qwen3-tts-1.7b"),
    ),
    voices=VOICES,
    openai_voices=OPENAI_VOICES,
    tiny=(Tiny("qwen3_tts", Entry("models.qwen3_tts.tiny:build_tiny"),
               Entry("models.qwen3_tts.tiny:ALL_SIZES"), options=("variant", "proj"),
               program=Entry("models.qwen3_tts.random_program:random_program")),),
    calibration=Entry("models.qwen3_tts.sim_fit:CALIBRATION"),
    reference=Entry("models.qwen3_tts.reference"),
    demos=(Demo("demo", Entry("models.qwen3_tts.demo:build_demo"), version="3", recipe="demo",
                description="tiny random weights, offline; its audio is not speech"),),
    # 24 kHz PCM, 1920 samples (80 ms) per frame, 16 codebooks. The sim's chunks are the design paper's
    # Qwen3-TTS configuration (every chunk 10 frames), which the GPU profiles in recipes/gpus/ assume.
    sim=SimSpec(sample_rate=24000, frame_rate=12.5, samples_per_frame=1920, codebooks=16,
                chunk=ChunkSchedule(first=10, steady=10),
                models=(SimModel("qwen3-tts-0.6b", _sizes(1024, 3072)),
                        SimModel("qwen3-tts-1.7b", _sizes(2048, 6144)))),
)
