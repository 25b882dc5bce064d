"""Turning a Work into a model-program call: the one place that maps stage names to program methods
(used by the cpu and sim executors; a CUDA backend replays graphs instead but keeps the same mapping)."""

from __future__ import annotations

from typing import Any

from voxcli.engine.executors.base import Work
from voxcli.engine.isolation import Isolated, run_isolated
from voxcli.models.base import ModelProgram


def run_work(program: ModelProgram, work: Work) -> list[Any]:
    return stage_call(program, work.stage)(work.rows)


def run_work_isolated(program: ModelProgram, work: Work) -> Isolated:
    """`run_work`, but a stage that raises fails only the rows responsible (engine/isolation.py)."""
    return run_isolated(stage_call(program, work.stage), work.rows)


def stage_call(program: ModelProgram, stage: str) -> Any:
    if stage == "decode":
        return program.decode
    if stage == "prefill":
        return program.prefill
    if stage == "codec":
        return program.codec
    raise ValueError(f"unknown stage {stage!r}")
