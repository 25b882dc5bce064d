"""The late-chunk path under a codec-starved split, and its ablations, side by side (issue 17 part 3).

    nice -n 10 .venv/bin/python scripts/late_chunks.py --duration 60 --seeds 2 --out out/late_chunks.json
    nice -n 10 .venv/bin/python scripts/late_chunks.py --split recipe --rate 4   # light load: B binds

The shipped recipe (`--model`, default qwen3-tts-1.7b) on the honest sim (`--gpu`, default h100) with the
codec partition cut to `--split` (default 112/16: 16 SMs cannot keep up at `--rate` 28 req/s, so later
chunks run short of slack and stalls can happen; at light load on the recipe's split, batches below B wait
for their deadline trigger instead), LibriTTS, open-loop Poisson, `--seeds` x `--duration` s
at the one rate. Every combination of the three late-chunk flags is run (`late_urgent`: a later chunk near
its deadline moves to the urgent lane; `deadline_launch`: a background batch below B launches when
waiting longer would be late; `slack_cap`: a background batch is cut to what ends before its first chunk
turns urgent), each printing SLO attainment, stalled requests and the scheduler's counts: promoted chunks,
deadline launches, slack cuts. The same arrivals for every row (the sweep's seeds).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

from voxcli.bench.sweep import SweepSpec, Variant, sweep_variant
from voxcli.bench.targets import model_config, sim_target
from voxcli.bench.workloads import load_workload

ROOT = Path(__file__).resolve().parent.parent
FLAGS = ("late_urgent", "deadline_launch", "slack_cap")


def run(args, flags: dict[str, bool]) -> dict:
    sets = [f"sim_model={args.sim_model}", *args.set]
    if args.split != "recipe":
        lm, codec = (int(x) for x in args.split.split("/"))
        sets[1:1] = [f"lm_sms={lm}", f"codec_sms={codec}"]
    cfg = model_config(args.model, "sim", args.gpu, sets).replace(**flags)
    label = " ".join(f"{k}={'on' if v else 'off'}" for k, v in flags.items())
    spec = SweepSpec(rates=[args.rate], duration_s=args.duration, seeds=args.seeds, warmup=64)
    t0 = time.process_time()
    sw = sweep_variant(sim_target(cfg, Variant(label)), Variant(label), spec, load_workload(args.workload))
    (r,) = sw.results
    row = {"flags": flags, "rate": r.rate, "attainment": r.attainment, "sent": r.sent, "stalled": r.stalled,
           "promoted": r.promoted, "deadline_launches": r.deadline_launches, "slack_cuts": r.slack_cuts,
           "ttfa_p50": r.ttfa_p50, "rejected": r.rejected, "cpu_s": round(time.process_time() - t0, 1),
           "per_seed": [[s.to_dict() for s in seed] for seed in sw.per_seed]}
    print(f"  {label:48s} SLO {r.attainment * 100:5.1f}%  stalled {r.stalled:5d}/{r.sent}  promoted "
          f"{r.promoted:6d}  deadline launches {r.deadline_launches:5d}  slack cuts {r.slack_cuts:5d}  "
          f"rejected {r.rejected:4d}  ({row['cpu_s']:.0f} CPU s)", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen3-tts-1.7b")
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--sim-model", default="honest")
    ap.add_argument("--split", default="112/16", help="LM/codec SMs, or `recipe` for the recipe's own")
    ap.add_argument("--rate", type=float, default=28.0, help="offered req/s")
    ap.add_argument("--workload", default="libritts")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="engine override for every row")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "late_chunks.json")
    args = ap.parse_args()
    print(f"{args.model} on {args.gpu} ({args.sim_model} sim) at {args.split}, {args.workload} "
          f"{args.rate:g} req/s, {args.seeds} x {args.duration:g} s")
    rows = [run(args, dict(zip(FLAGS, values, strict=True)))
            for values in itertools.product((True, False), repeat=len(FLAGS))]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": vars(args) | {"out": str(args.out)}, "rows": rows}, indent=1))
    print(f"JSON: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
