"""How a failed batch or row is reported: the reason every request of a failed stage ends with."""

from __future__ import annotations

from voxcli.engine.executors.base import Completion


def describe(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def stage_reason(stage: str, c: Completion) -> str:
    """Why every request of a failed batch failed."""
    if c.error is not None:
        return f"the {stage} stage failed: {describe(c.error)}"
    return f"the {stage} stage returned {0 if c.result is None else len(c.result)} results for " \
           f"{len(c.work.rows)} rows"
