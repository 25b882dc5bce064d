"""`vox profile --gpus N`'s placement prediction: the throughput model's best placements, each simulated
for its SLO capacity (voxcli/sim/placement.py) under both network settings, as a table.

The throughput model (profile.rank_placements) sums each role's bound; what a placement serves within
the SLO is lower (queueing, routing, the hops of a split), by a different factor per placement, so the
ranking can change: the table is sorted by the simulated capacity (optimistic network), bound beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from voxcli.placement import Placement
from voxcli.sim.placement import (
    NETWORKS,
    OPTIMISTIC,
    PESSIMISTIC,
    PlacementPrediction,
    predict_capacity,
)


def candidates(ranked: Sequence[Any], gpus: int, top: int) -> list[tuple[Placement, float]]:
    """The `top` runnable placements (LM-only with codec-only) by throughput bound, N x both always among
    them (the baseline every split is measured against)."""
    out = [(Placement(p.both, p.lm_only, p.codec_only), p.rps) for p in ranked
           if p.rps > 0 and (p.lm_only > 0) == (p.codec_only > 0)]
    both = [x for x in out if x[0].both == gpus]
    return (both + [x for x in out if x[0].both != gpus])[:max(1, top)]


def predict_placements(config: Any, runs: Sequence[tuple[Placement, float]], utterances: Sequence[Any],
                       duration_s: float, seeds: int, frame_rate: float, profile: Any = None,
                       starting: Callable[[str], None] | None = None,
                       rate_done: Callable[[Any, Any], None] | None = None
                       ) -> list[tuple[Placement, float, dict[str, PlacementPrediction]]]:
    """Each placement's SLO capacity under every network setting, best (optimistic) first."""
    out = []
    for placement, bound in runs:
        got = {}
        for net in NETWORKS.values():
            if starting:
                starting(f"{placement.describe()} ({net.name} network)")
            got[net.name] = predict_capacity(config, placement, bound, utterances, net, duration_s, seeds,
                                             profile=profile, frame_rate=frame_rate, rate_done=rate_done)
        out.append((placement, bound, got))
    return sorted(out, key=lambda x: -x[2]["optimistic"].capacity90)


def placement_table(rows: Sequence[tuple[Placement, float, dict[str, PlacementPrediction]]], gpus: int,
                    duration_s: float, seeds: int) -> Any:
    from voxcli.tables import figure_table

    body = [[p.describe(), f"{bound:.1f}", got["optimistic"].cell, got["pessimistic"].cell,
             f"{got['optimistic'].capacity90 / bound:.2f}" if bound else "-"] for p, bound, got in rows]
    return figure_table(
        f"placements over {gpus} GPUs: SLO capacity (req/s with 90% of requests in SLO), simulated "
        f"{duration_s:g} s x {seeds} seeds per rate (voxcli/sim/placement.py)",
        ["placement", "bound", f"optimistic ({OPTIMISTIC.hop_s * 1e3:g} ms hops)",
         f"pessimistic ({PESSIMISTIC.hop_s * 1e3:g} ms hops)", "opt./bound"], body,
        left=["placement"])


def summary(rows: Sequence[tuple[Placement, float, dict[str, PlacementPrediction]]]) -> list[dict[str, Any]]:
    return [{"placement": p.describe(), "bound_rps": round(bound, 3),
             **{f"capacity90_{name}": pr.capacity90 for name, pr in got.items()},
             "simulated": {name: pr.to_dict() for name, pr in got.items()}} for p, bound, got in rows]
