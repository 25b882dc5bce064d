"""Turning a Work into a model-program call: the one place that maps stage names to program methods
(used by the cpu and sim executors; a CUDA backend replays graphs instead but keeps the same mapping)."""

from __future__ import annotations

from typing import Any

from voxcli.engine.executors.base import Work
from voxcli.models.base import ModelProgram


def run_work(program: ModelProgram, work: Work) -> list[Any]:
    if work.stage == "decode":
        return program.decode(work.rows)
    if work.stage == "prefill":
        return program.prefill(work.rows)
    if work.stage == "codec":
        return program.codec(work.rows)
    raise ValueError(f"unknown stage {work.stage!r}")
