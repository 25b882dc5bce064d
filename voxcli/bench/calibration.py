"""One command calibrates any family's simulated GPUs:

    .venv/bin/python -m voxcli.bench.calibration --family qwen3_tts --help    # the family's own options
    .venv/bin/python -m voxcli.bench.calibration --family dia                  # write Dia's profiles
    .venv/bin/python -m voxcli.bench.calibration --family higgs-v3-4b --row-ms 0.0341

`--family` is a family's package (qwen3_tts, dia, higgs_audio, speechlm, cosyvoice3), its name, or any of
its models (a sim model, hub id or demo alias). The family's calibration (`Family.calibration`, in its
`sim.py`) says what is derived and what is fitted; this command gives it the engine's simulator
(`EngineSimulator` of voxcli/sim/calibration.py, the models.sim_calibration.Simulator protocol) and
writes the files it returns under the repository root (recipes/gpus/*.toml; `--root` writes elsewhere,
e.g. to compare).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from voxcli.models.registry import find_family
from voxcli.sim.calibration import EngineSimulator, repo_root


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
