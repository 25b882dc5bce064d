"""A Higgs checkpoint's ModelSpec, built the same way from a loaded program and from the config files alone
(`describe`: `vox voices` answers without torch; tests/test_startup.py checks the two never disagree)."""

from __future__ import annotations

from pathlib import Path

from ..base import ChunkSchedule, ModelSpec
from ..codecs.dac.config import decoder_lookahead_frames
from ..dtypes import DTYPE_NAMES, FOLLOWS, DtypePolicy, Fixed, Part
from ..locate import read_json
from .codec_config import HiggsCodecConfig
from .config import HiggsConfig, parse_v2

# 25 frames/s at 24 kHz. The codec holds back 9.85 frames, so a first chunk of 15 frames is the smallest that
# yields a useful 206 ms of audio; then larger chunks (fewer, bigger codec batches once playback is buffered).
DEFAULT_CHUNKS = ChunkSchedule(first=15, ramp=(10, 25), steady=50)

# The LM and its DAC-style decoder follow --dtype (float64 for the exactness checks); the tokenizer's
# encoder, read on the first clone, runs in float32 as upstream's (its semantic model has no half path).
DTYPE_POLICY = DtypePolicy(parts={
    "lm": Part(FOLLOWS, ("weights",)),
    "codec": Part(FOLLOWS, ("codec_model.hnet",)),
    "encoder": Part(Fixed("float32"), ()),
}, accepts=DTYPE_NAMES)


def higgs_spec(name: str, cfg: HiggsConfig, rates: tuple[int, int], lookahead_frames: float,
               clones: bool) -> ModelSpec:
    """`clones`: the checkpoint's tokenizer has the encoder a voice clone needs (v2 layouts; not v3's)."""
    sr, hop = rates
    return ModelSpec(
        name=name,
        sample_rate=sr,
        frame_rate=sr / hop,
        samples_per_frame=hop,
        codebooks=cfg.num_codebooks,
        chunk=DEFAULT_CHUNKS,
        max_context=cfg.max_position_embeddings,
        voices=(),
        languages=(),
        modes=("tts", "clone") if clones else ("tts",),
        codec_lookahead_frames=lookahead_frames,
    )


def local_codec_config(root: Path) -> HiggsCodecConfig:
    """The checkpoint's own audio_tokenizer/config.json when it has one, else the released tokenizer's
    (24 kHz, hop 960, ratios 8, 5, 4, 2, 3); the codec itself is found, or refused, on first use."""
    cfg_path = root / "audio_tokenizer" / "config.json"
    return HiggsCodecConfig.read(cfg_path) if cfg_path.exists() else HiggsCodecConfig()


def describe(path: str) -> ModelSpec | None:
    """From config.json and audio_tokenizer/config.json alone, for the transformers layout
    (higgs_audio_v2); None for the others, whose sizes come from their weights (they are loaded)."""
    root = Path(path)
    d = read_json(root / "config.json")
    if d.get("model_type") != "higgs_audio_v2":
        return None
    cfg = parse_v2(d, str(root / "config.json"))
    codec = local_codec_config(root)
    return higgs_spec(root.name, cfg, (codec.sampling_rate, codec.hop_length),
                      decoder_lookahead_frames(codec.upsampling_ratios), clones=True)
