"""The device check's model: the registry's Qwen3-TTS program with random weights drawn where it runs
(`Tiny.program`; the builder is models/qwen3_tts/random_program.py). No checkpoint is written or read."""

from __future__ import annotations

from typing import Any

from voxcli.models.registry import get_tiny

FAMILY = "qwen3_tts"  # the family gpu_check measures (its graph stages, its cost profiles)


def random_program(size: str = "1.7b", device: Any = "cuda", dtype: Any = None, seed: int = 0) -> Any:
    """The program of `size` ("tiny", "0.6b", "1.7b") on `device` (bfloat16 unless `dtype` is given)."""
    build = get_tiny(FAMILY).program
    if build is None:
        raise RuntimeError(f"the {FAMILY} family offers no random-weight program builder")
    # the builder's own default dtype (bfloat16) unless one is given
    return build(size, device, seed=seed) if dtype is None else build(size, device, dtype, seed)
