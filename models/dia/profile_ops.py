"""Where a per-op profiler splits Dia's decode step (`Family.profile_ops`; `python -m benchmarks profile_cfg`
wraps each function to time it): the family names its own functions, so a profiler outside the package
needs none of their names, private ones included."""

from __future__ import annotations

from typing import Any

from . import layers, program, sampling


def profile_ops() -> tuple[tuple[Any, str, str], ...]:
    """(owner, attribute, op category) of every function the decode step's time is split over."""
    return (
        (layers.ChannelEmbedding, "forward", "embed"),
        (layers.DecoderLayer, "self_attend", "self-attn"),
        (layers.DecoderLayer, "cross_attend", "cross-attn"),
        (layers.DecoderLayer, "_finish", "mlp"),
        (layers.DiaWeights, "logits", "logits"),
        (sampling, "cfg_combine", "combine"),
        (program, "process", "sampling"),
        (program, "draw", "sampling"),
        (program.DiaProgram, "_paged", "setup"),
        (program, "build_plans", "setup"),
        (layers.DecoderLayer, "gather_cross_kv", "setup"),
    )
