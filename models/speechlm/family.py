"""ESPnet SpeechLM unified LMs (Bagpiper, OpusLM) as a registered family (see models/registry.py).

Their checkpoints have no config.json of their own: the family claims a folder (or a cached hub snapshot)
holding one train*.yaml, inference.yaml and model.pt. Imports nothing heavy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from voxcli.config import ChunkSchedule

from ..registry import Family, HubModel, SimSpec


def load(path: str, device: str = "cpu", dtype: str = "float32") -> Any:
    from .program import SpeechLMProgram

    return SpeechLMProgram.load(path, device=device, dtype=dtype)


def claims(path: Path) -> bool:
    from .config import is_speechlm_dir

    return is_speechlm_dir(path)


FAMILY = Family(
    name="ESPnet SpeechLM (unified text+audio)",
    model_types=(),
    load=load,
    claims=claims,
    claim_file="inference.yaml",
    hub_models=(
        HubModel("espnet/bagpiper-tts-sft", "Bagpiper TTS (Qwen3-8B, 8 X-Codec streams): writes a text plan, "
                 "then speaks; CFG 3"),
    ),
    # X-Codec / OpusLM's DAC: 16 kHz, 320 samples (20 ms) per frame, 8 codec streams.
    sim=SimSpec(sample_rate=16000, frame_rate=50.0, samples_per_frame=320, codebooks=8,
                chunk=ChunkSchedule(first=10, ramp=(25,), steady=50), cfg_scale=3.0, lead_steps=7),
)
