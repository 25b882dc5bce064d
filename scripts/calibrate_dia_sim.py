"""Write the Dia-1.6B GPU cost profiles (no fitted parameter; see voxcli/bench/calibrate_dia.py):

    .venv/bin/python scripts/calibrate_dia_sim.py [--gpu h100]

recipes/gpus/<gpu>-dia-1.6b.toml (pessimistic, what `--gpu <gpu> --model dia-1.6b` loads) and
recipes/gpus/<gpu>-optimistic-dia-1.6b.toml (`--gpu <gpu>-optimistic`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from voxcli.bench.calibrate_dia import profile_toml

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", default="h100")
    args = ap.parse_args()
    for setting, name in (
        ("pessimistic", f"{args.gpu}-dia-1.6b"),
        ("optimistic", f"{args.gpu}-optimistic-dia-1.6b"),
    ):
        out = ROOT / "recipes" / "gpus" / f"{name}.toml"
        out.write_text(profile_toml(args.gpu, setting))
        print(out)


if __name__ == "__main__":
    main()
