"""Write the Fun-CosyVoice3-0.5B GPU cost profiles (no fitted parameter: calibrate_cosyvoice.py):

    .venv/bin/python scripts/calibrate_cosyvoice_sim.py [--gpu h100]

recipes/gpus/<gpu>-cosyvoice3-0.5b.toml (pessimistic, what `--gpu <gpu> --model cosyvoice3-0.5b` loads) and
recipes/gpus/<gpu>-optimistic-cosyvoice3-0.5b.toml (`--gpu <gpu>-optimistic`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from voxcli.bench.calibrate_cosyvoice import profile_toml

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu", default="h100")
    args = ap.parse_args()
    for setting, name in (
        ("pessimistic", f"{args.gpu}-cosyvoice3-0.5b"),
        ("optimistic", f"{args.gpu}-optimistic-cosyvoice3-0.5b"),
    ):
        out = ROOT / "recipes" / "gpus" / f"{name}.toml"
        out.write_text(profile_toml(args.gpu, setting))
        print(out)


if __name__ == "__main__":
    main()
