"""Choose the backbone/codec SM split by simulating it (`vox profile`, issue 10 item 5).

The throughput model of `voxcli.profile` (each partition's throughput at its expected batch) is a first
pass: it ranks every split by the load it could sustain and keeps the best `keep` of them. Each kept
split is then run through exactly what `vox bench --executor sim --set lm_sms=L --set codec_sms=C`
runs (same config, target, sweep, seeds, workload), and the split with the highest simulated capacity
at 90% wins (then at 99%, then the larger backbone). Because it is the same sweep, `vox bench` on the
chosen split reports the same capacity.

Splits are simulated as the recipe writes them (voxcli.profile.split_points already gives the backbone
the largest multiple of 8 SMs beside the codec; the rest stays spare).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from voxcli.bench.sweep import SweepSpec, Variant, VariantSweep, sweep_variant
from voxcli.bench.workloads import Utterance
from voxcli.config import EngineConfig
from voxcli.profile import SplitPoint


@dataclass
class SimulatedSplit:
    point: SplitPoint  # the throughput model's view of this split
    lm_sms: int  # as simulated and written to the recipe (multiple of 8)
    codec_sms: int
    sweep: VariantSweep

    @property
    def capacity90(self) -> float:
        return self.sweep.capacity_stats(0.90)["mean"]

    @property
    def capacity99(self) -> float:
        return self.sweep.capacity_stats(0.99)["mean"]

    def to_dict(self) -> dict[str, Any]:
        return {"lm_sms": self.lm_sms, "codec_sms": self.codec_sms,
                "analytic_rps": self.point.sustainable_rps, "capacity90": self.capacity90,
                "capacity99": self.capacity99, "sweep": self.sweep.to_dict()}


def split_variant(point: SplitPoint) -> Variant:
    return Variant(point.name, {"policy": "full", "lm_sms": point.lm_sms, "codec_sms": point.codec_sms})


def prune(points: Sequence[SplitPoint], keep: int) -> list[SplitPoint]:
    """The `keep` splits the throughput model rates highest (sustainable load), in codec-SM order."""
    if keep < 1:
        raise ValueError(f"keep must be >= 1 split, got {keep}")
    best = sorted(points, key=lambda p: (-p.sustainable_rps, p.codec_sms))[:keep]
    return sorted(best, key=lambda p: p.codec_sms)


def simulate_splits(config: EngineConfig, points: Sequence[SplitPoint], utterances: Sequence[Utterance],
                    spec: SweepSpec, make_target: Callable[[EngineConfig, Variant], Any],
                    progress: Callable[[SimulatedSplit], None] | None = None,
                    starting: Callable[[int, int, SplitPoint], None] | None = None,
                    rate_done: Callable[[VariantSweep, Any], None] | None = None) -> list[SimulatedSplit]:
    """Sweep every split; `starting(i, n, point)` before each, `rate_done(sweep, rate result)` after each
    rate (the progress a minutes-long `vox profile` shows), `progress(result)` after each split."""
    out = []
    for i, p in enumerate(points, 1):
        v = split_variant(p)
        if starting:
            starting(i, len(points), p)
        target = make_target(config, v)
        try:
            sw = sweep_variant(target, v, spec, utterances, rate_done)
        finally:
            target.close()
        s = SimulatedSplit(p, v.overrides["lm_sms"], p.codec_sms, sw)
        out.append(s)
        if progress:
            progress(s)
    return out


def choose_simulated(results: Sequence[SimulatedSplit]) -> SimulatedSplit:
    if not results:
        raise ValueError("no split was simulated")
    return max(results, key=lambda s: (s.capacity90, s.capacity99, s.lm_sms))
