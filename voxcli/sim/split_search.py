"""Choose the backbone/codec SM split by simulating it (`vox profile`, issue 10 item 5).

The throughput model of `voxcli.sim.splits` (each partition's throughput at its expected batch) is a first
pass: it ranks every split by the load it could sustain and keeps the best `keep` of them. Each kept
split is then run through exactly what `vox bench --executor sim --set lm_sms=L --set codec_sms=C`
runs (same config, target, sweep, seeds, workload), and the split with the highest simulated capacity
at 90% wins (then at 99%, then the larger backbone). Because it is the same sweep, `vox bench` on the
chosen split reports the same capacity.

Splits are simulated as the recipe writes them (voxcli.sim.splits.split_points already gives the backbone
the largest multiple of 8 SMs beside the codec; the rest stays spare), and each is bounded on that very
config (voxcli/sim/config_bound.py SplitBounds): `bound_notes` says, for a capacity above its bound, which of
the bound's assumptions the simulation does not share. The rates are a grid fine enough for the bound
(`rate_grid`: a 4 req/s grid against Dia's 7.2 req/s bound could only read 4 or 8).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from voxcli.bench.sweep import SweepSpec, Variant, VariantSweep, sweep_variant
from voxcli.bench.workloads import Utterance
from voxcli.config import EngineConfig
from voxcli.sim.splits import SplitPoint


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


WINDOW_LIVES = 5  # a window this many request lifetimes long reaches the steady batch the bound assumes
GRID_STEPS = 20  # rates from half the bound to the bound: a capacity is read to 1/20 of the bound or finer


def grid_step(bound_rps: float) -> float:
    """The largest round step (1, 2, 2.5, 4 or 5 x a power of ten) at most `bound_rps` / GRID_STEPS."""
    if not (math.isfinite(bound_rps) and bound_rps > 0):
        raise ValueError(f"a rate grid needs a positive bound, got {bound_rps}")
    target = bound_rps / GRID_STEPS
    scale = 10.0 ** math.floor(math.log10(target))
    return max(m * scale for m in (1.0, 2.0, 2.5, 4.0, 5.0) if m * scale <= target * (1 + 1e-9))


def rate_grid(bound_rps: float) -> tuple[list[float], float]:
    """(rates, step) for simulating splits whose best bound is `bound_rps`: a quarter of the bound, then
    every step from half the bound to 1.25x it (a capacity at 90% counts offered load and may reach the
    bound / 0.9); the sweep's stop rule ends a split's rates past its capacity."""
    step = grid_step(bound_rps)
    lo, hi = math.ceil(0.5 * bound_rps / step), math.ceil(1.25 * bound_rps / step)
    quarter = max(1, round(0.25 * bound_rps / step))
    rates = sorted({quarter * step, *(k * step for k in range(lo, hi + 1))})
    return [round(r, 6) for r in rates], step


def bound_notes(tried: Sequence[SimulatedSplit], bounds: Callable[[int, int], Any],
                duration_s: float) -> list[str]:
    """One line per simulated split whose capacity passes its bound, saying which of the bound's
    assumptions the simulation does not share: the capacity counts offered load (a share 1 - q of it may
    be refused or late), a window too short for the batch to fill (the bound is a sustained throughput:
    a window under WINDOW_LIVES request lifetimes), the urgent lane took later chunks (the bound's codec
    lane credits none, voxcli/sim/bound.py assumption 4)."""
    from voxcli.bench.metrics import capacity

    shape = getattr(bounds, "shape", None)  # SplitBounds: the request the bound assumes
    notes = []
    for s in tried:
        b = bounds(s.lm_sms, s.codec_sms)
        over = [(q, s.sweep.capacity_stats(q)["mean"]) for q in (0.90, 0.99)]
        over = [(q, cap) for q, cap in over if cap > b.rps * (1 + 1e-9)]
        if not over:
            continue
        at = capacity(s.sweep.results, over[0][0])
        r = next((r for r in s.sweep.results if r.rate == at), None)
        caps = " and ".join(f"{cap:.1f} @{q:.0%}" for q, cap in over)
        reasons = []
        if r is None or r.goodput <= b.rps * 1.02:
            served = f"{r.goodput:.1f} served/s" if r is not None else "what it served"
            reasons.append(f"capacity is offered load ({served} at {at:g}, within the bound): up to "
                           f"{1 - over[-1][0]:.0%} of it may miss")
        else:
            life = b.step_s * (shape.frames + shape.lead) if shape is not None else 0.0
            if life and duration_s < WINDOW_LIVES * life:
                reasons.append(f"{r.goodput:.1f} served/s at {at:g} in {duration_s:g} s windows, each "
                               f"request decoding ~{life:.1f} s at the bound's batch of {b.best_requests:g}: "
                               f"too short to fill the batch (--sim-duration {10 * math.ceil(life)} measures "
                               "the sustained throughput the bound is)")
            if r.promoted and b.binding == "codec":
                reasons.append(f"the urgent lane took {r.promoted} later chunks at {at:g} req/s; the bound's "
                               "codec lane credits none (voxcli/sim/bound.py assumption 4)")
            if not reasons:
                reasons.append(f"{r.goodput:.1f} served/s at {at:g} in {duration_s:g} s windows; the bound "
                               "is a sustained throughput (a lag that grows past the window is not seen)")
        notes.append(f"{s.point.name}: capacity {caps} > bound {b.rps:.1f} ({b.binding}): "
                     + "; ".join(reasons))
    return notes


def simulated_table(tried: Sequence[SimulatedSplit], bounds: Callable[[int, int], Any], step: float):
    """The simulated candidates beside their bound: capacity at 90% / 99% and its ratio to the bound."""
    from voxcli.bench.report import bound_cell, capacity_cell
    from voxcli.tables import figure_table

    rows = []
    for s in tried:
        b = bounds(s.lm_sms, s.codec_sms)
        bd = {"rps": b.rps}
        rows.append([s.point.name, f"{b.rps:.1f}", b.binding, capacity_cell(s.sweep, 0.90),
                     bound_cell(s.sweep, 0.90, bd), capacity_cell(s.sweep, 0.99),
                     bound_cell(s.sweep, 0.99, bd)])
    return figure_table(f"simulated splits: capacity (req/s, rates every {step:g}) and capacity / bound; the "
                        "bound is of the same config (voxcli/sim/bound.py)",
                        ("split", "bound", "binds", "capacity @90%", "/bound", "capacity @99%", "/bound"),
                        rows, left=("binds",))
