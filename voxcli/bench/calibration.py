"""One command calibrates any family's simulated GPUs:

    .venv/bin/python -m voxcli.bench.calibration --family qwen3_tts --help    # the family's own options
    .venv/bin/python -m voxcli.bench.calibration --family dia                  # write Dia's profiles
    .venv/bin/python -m voxcli.bench.calibration --family higgs-v3-4b --row-ms 0.0341

`--family` is a family's package (qwen3_tts, dia, higgs_audio, speechlm, cosyvoice3), its name, or any of
its models (a sim model, hub id or demo alias). The family's calibration (`Family.calibration`, in its
`sim.py`) says what is derived and what is fitted; this module gives it the engine's simulator
(`EngineSimulator`, the models.sim_calibration.Simulator protocol) and writes the files it returns
under the repository root (recipes/gpus/*.toml; `--root` writes elsewhere, e.g. to compare).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

from voxcli.models.registry import find_family
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
        from voxcli.engine.cost import CostProfile

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


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("--family", default=None)
    first.add_argument("--root", type=Path, default=None)
    known, rest = first.parse_known_args(argv)
    found = find_family(known.family) if known.family else None
    calibration = found.calibration() if found is not None and found.calibration is not None else None
    ap = argparse.ArgumentParser(prog="python -m voxcli.bench.calibration",
                                 description=calibration.description if calibration else __doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", required=True,
                    help="the family to calibrate (its package, its name or one of its models)")
    ap.add_argument("--root", type=Path, default=None,
                    help="write under this folder instead of the repository root (recipes/gpus/...)")
    if calibration is not None:
        calibration.add_options(ap)
    args = ap.parse_args(argv)
    if found is None:
        print(f"no registered family is {args.family!r} (models/registry.py)", file=sys.stderr)
        return 2
    if calibration is None:
        print(f"{found.name} registers no simulator calibration", file=sys.stderr)
        return 2
    args.root = root = args.root or repo_root()
    for rel, text in calibration.run(args, EngineSimulator()).items():
        out = root / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
