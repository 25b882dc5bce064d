"""The family's random-weight checkpoints by size, for `Tiny` (models/registry.py): OpusLM's layout
(tiny_opuslm.py: tiny, real) and Bagpiper's hearing layout (hear-tiny: tiny.py; hear-real: real_hearing.py,
SmolLM2-1.7B's backbone with the released X-Codec's sizes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .tiny_opuslm import SIZES as OPUSLM_SIZES
from .tiny_opuslm import build_opuslm

SIZES = (*OPUSLM_SIZES, "hear-tiny", "hear-real")


def build_sized(out: Path, size: str = "tiny", seed: int = 0, **options: Any) -> Path:
    if size == "hear-real":
        from .real_hearing import build_real_hearing

        return build_real_hearing(Path(out), seed=seed)
    if size == "hear-tiny":
        from .tiny import build_tiny

        return build_tiny(Path(out), seed=seed)
    if size.startswith("hear-"):
        raise ValueError(f"the hearing sizes are hear-tiny and hear-real, not {size}")
    return build_opuslm(Path(out), size=size, seed=seed, **options)
