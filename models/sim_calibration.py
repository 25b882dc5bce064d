"""What a family registers to calibrate its simulated GPUs, and the simulator its calibration is handed.

A family's `sim.py` derives its GPU cost profiles from arithmetic on its sizes (models/sim_priors.py,
models/sim_profile.py) and fits at most one parameter against a published capacity. Fitting runs the
engine's simulator, which lives outside models/ (models/ imports nothing from voxcli): the framework
(`python -m voxcli.bench.calibration --family NAME`) hands the family's `run` a `Simulator`, and the
family asks it for capacities of `Probe`s. `run` returns the files to write; the framework writes them.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Probe:
    """One engine on the simulated GPU: the settings it runs with and the cost profile it reads."""

    gpu: str  # the --gpu name (a recipes/gpus/ profile name)
    profile: Mapping[str, Any]  # the cost profile to simulate with (models/sim_profile.py's dict layout)
    settings: Mapping[str, Any] = field(default_factory=dict)  # engine settings over the base
    # The base the settings apply to: a sim model's recipe (as `vox bench --model NAME` runs it; the
    # settings are then `--set key=value` strings' values), or None for the engine's defaults.
    model: str | None = None
    label: str = ""  # the variant's label in progress output


@dataclass(frozen=True)
class SweepOutcome:
    """Capacities of one sweep (req/s at 90% / 99% attainment, and their means over seeds)."""

    capacity90: float
    capacity99: float
    mean90: float
    mean99: float
    wall_s: float
    rates: list[dict[str, Any]]  # per rate, seeds pooled (RateResult.to_dict())


class Simulator(Protocol):
    """The engine's simulator, as the framework hands it to a family's calibration: LibriTTS test-clean,
    open-loop Poisson arrivals, a warm-up burst of 64 requests before the first rate."""

    def sweep(self, probe: Probe, rates: Sequence[float] | str, duration_s: float, seeds: int,
              stop_below: float | None = None, frame_rate: float | None = None) -> SweepOutcome:
        """Rates back to back (`vox bench`'s sweep; `rates` as a list or as `--rates` reads them, "2:60:2");
        `frame_rate` sets the request lengths (None: the default family's)."""
        ...

    def one_rate(self, probe: Probe, rate: float, duration_s: float, seeds: int) -> tuple[float, float]:
        """(attainment, completed req/s) of one rate on a fresh engine, seeds pooled."""
        ...


@dataclass(frozen=True)
class Calibration:
    """A family's simulator calibration: its command-line options and what it writes."""

    description: str  # the command's help: what is derived, what is fitted to what
    add_options: Callable[[argparse.ArgumentParser], None]
    # (parsed options, simulator) -> {path relative to the root: text}; the framework writes them (every
    # recipes/gpus/ profile the family ships, plus any report of the fit). `options.root` is that root
    # (the repository's, or --root), which holds the shipped recipes/.
    run: Callable[[argparse.Namespace, Simulator], Mapping[str, str]]


def fit_interval(capacity_at: Callable[[float], float], target: float, lo: float, hi: float, iters: int,
                 rising: bool, name: str, label: str) -> float:
    """The geometric middle of the interval of a parameter (`name`, searched in [lo, hi]) in which
    `capacity_at` (a seed-mean capacity at 90%, discrete in steps of 2 req/s) is exactly `target`: one
    geometric bisection for the edge where it reaches `target`, one for `target + 2`; `rising` when the
    capacity grows with the parameter. A midpoint both bisections probe is simulated once. Each probe is
    printed as `  fit: <name> <value> -> <label> capacity@90% <capacity> req/s`."""
    seen: dict[float, float] = {}
    edges = []
    for above in ((target, target + 2) if rising else (target + 2, target)):
        a, b = lo, hi
        for _ in range(iters):
            mid = (a * b) ** 0.5
            if mid not in seen:
                seen[mid] = capacity_at(mid)
            cap = seen[mid]
            print(f"  fit: {name} {mid:.4f} -> {label} capacity@90% {cap:g} req/s", flush=True)
            if rising:
                a, b = (a, mid) if cap >= above else (mid, b)
            else:
                a, b = (mid, b) if cap >= above else (a, mid)
        edges.append((a * b) ** 0.5)
    lower, upper = sorted(edges)
    print(f"  {label} capacity@90% = {target:g} for {name} in [{lower:.4f}, {upper:.4f})")
    return round((lower * upper) ** 0.5, 4)
