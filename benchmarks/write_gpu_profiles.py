"""Rewrite recipes/gpus/*.toml from voxcli/bench/calibrate.py at their shipped fitted value, without
refitting (e.g. after a change to the derivation or to the [sim] models). The header of the last
calibration run (its first lines, which say what was fitted to what) is kept.

    .venv/bin/python -m benchmarks write_gpu_profiles
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from voxcli.bench.calibrate import FITTED_NAME, GPUS, profile_toml

ROOT = Path(__file__).resolve().parent.parent
HEADER_LINES = 4  # calibrate_sim.py's own header; the derivation lines after it are regenerated


def main() -> None:
    for gpu in GPUS:
        path = ROOT / "recipes" / "gpus" / f"{gpu}.toml"
        text = path.read_text()
        meta = tomllib.loads(text)["gpu"]
        model = meta["calibration"]
        fitted = meta[FITTED_NAME[model]]
        header = [line[2:] for line in text.splitlines()[:HEADER_LINES]]
        path.write_text(profile_toml(gpu, fitted, header, model))
        print(f"{path.relative_to(ROOT)}: {model} {FITTED_NAME[model]} = {fitted}")


if __name__ == "__main__":
    main()
