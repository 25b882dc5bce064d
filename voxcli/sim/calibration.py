"""The engine's simulator as a family's calibration runs its probes on (`EngineSimulator`, the
models.sim_calibration.Simulator protocol): the engine on the sim executor over LibriTTS, swept at rates
or run at one. The command that hands it to a family's calibration and writes the profiles is
`python -m voxcli.bench.calibration` (voxcli/bench/calibration.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

from voxcli.models.sim_calibration import Probe, SweepOutcome


def repo_root() -> Path:
    """The folder holding recipes/ (the repository root in a checkout)."""
    return Path(str(resources.files("voxcli.recipes"))).parent


class EngineSimulator:
    """The Simulator a calibration runs its probes on: the engine on the sim executor, LibriTTS."""

    @cached_property
    def utterances(self) -> Any:
        from voxcli.bench.workloads import load_workload

        return load_workload("libritts")

    def _target(self, probe: Probe) -> Any:
        from voxcli.bench.targets import model_config, sim_target
        from voxcli.config import EngineConfig
        from voxcli.sim.cost import CostProfile

        if probe.model is None:
            config = EngineConfig(executor="sim", gpu=probe.gpu, **probe.settings).replace()
        else:
            overrides = [f"{k}={v}" for k, v in probe.settings.items()]
            config = model_config(probe.model, "sim", probe.gpu, overrides)
        profile = CostProfile.from_dict(dict(probe.profile))
        return sim_target(config, _variant(probe), profile=profile)

    def sweep(self, probe: Probe, rates: Sequence[float] | str, duration_s: float, seeds: int,
              stop_below: float | None = None, frame_rate: float | None = None) -> SweepOutcome:
        from voxcli.bench.sweep import SweepSpec, parse_rates, sweep_variant

        rates = parse_rates(rates) if isinstance(rates, str) else list(rates)
        spec = SweepSpec(rates=rates, duration_s=duration_s, seeds=seeds, warmup=64, stop_below=stop_below)
        if frame_rate is not None:
            spec.frame_rate = frame_rate
        sw = sweep_variant(self._target(probe), _variant(probe), spec, self.utterances)
        return SweepOutcome(capacity90=sw.capacity90, capacity99=sw.capacity99,
                            mean90=sw.capacity_stats(0.90)["mean"], mean99=sw.capacity_stats(0.99)["mean"],
                            wall_s=sw.wall_s, rates=[r.to_dict() for r in sw.results])

    def one_rate(self, probe: Probe, rate: float, duration_s: float, seeds: int) -> tuple[float, float]:
        from voxcli.bench.client import schedule
        from voxcli.bench.metrics import rate_result

        target = self._target(probe)
        records = []
        for k in range(seeds):
            records += target.play(schedule(rate, duration_s, 7_000 + k, self.utterances), 900.0)
        target.close()
        r = rate_result(rate, records, duration_s * seeds)
        return r.attainment, r.completed_rps


def _variant(probe: Probe) -> Any:
    from voxcli.bench.sweep import Variant

    return Variant(probe.label or str(probe.settings.get("policy", "")))
