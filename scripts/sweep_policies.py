"""Which policy should ship: candidate policies side by side, per workload, in one run (issue 17 part 2).

    nice -n 10 .venv/bin/python scripts/sweep_policies.py --seeds 3 --duration 60 --out out/policies.json
    nice -n 10 .venv/bin/python scripts/sweep_policies.py --workloads libritts --policies deadline,gate \
        --seeds 2 --overload 1.5,2

Every sweep runs the shipped recipe (`--model`, default qwen3-tts-1.7b: what `vox bench` and `vox serve`
read) on the honest sim (`--gpu`, default h100) with the candidate's overrides on top, LibriTTS /
Seed-TTS / libritts-long / chat, open-loop Poisson, `--seeds` arrival seeds x `--duration` s per rate,
capacity at 90% / 99% = mean over the seeds of each seed's own capacity (the rates start low enough that
every candidate passes the first one). One table per workload: capacity, its spread, and the ratio to the
paper's design (`paper`, else `deadline`). `--overload` then offers each candidate multiples of its own
90% capacity and prints goodput / capacity (the issue's check: >= 0.9 past capacity).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from voxcli.bench.client import schedule
from voxcli.bench.metrics import rate_result
from voxcli.bench.sweep import SweepSpec, Variant, parse_rates, sweep_variant
from voxcli.bench.targets import model_config, sim_target
from voxcli.bench.workloads import load_workload

ROOT = Path(__file__).resolve().parent.parent

# name -> overrides on top of the recipe. `paper` is the paper's design as the paper built it (deadline
# admission, decode graphs at powers of two, 96/32: the recipe before issue 17 with deadline admission);
# `deadline` is its admission on the shipped recipe. The rest keep the recipe's admission unless they
# name one.
POW2 = (1, 2, 4, 8, 16, 32, 64, 128, 256)
CANDIDATES: dict[str, dict] = {
    # the paper's design as the paper built it (its 100/32 is 96/32 on Hopper's groups of 8)
    "paper": {"admission": "deadline", "decode_buckets": POW2, "lm_sms": 96, "codec_sms": 32},
    # the shipped recipe before issue 17 (with today's gate)
    "gate-pow2": {"admission": "ttfa-gate", "decode_buckets": POW2, "lm_sms": 96, "codec_sms": 32},
    "deadline": {"admission": "deadline"},
    "gate": {"admission": "ttfa-gate"},
    "gate+uc": {"admission": "ttfa-gate", "urgency_chunking": True},
    "gate+ab": {"admission": "ttfa-gate", "adaptive_batching": True},
    "gate+uc+ab": {"admission": "ttfa-gate", "urgency_chunking": True, "adaptive_batching": True},
    "recipe": {},  # whatever the shipped recipe says now
    "recipe+uc+ab": {"urgency_chunking": True, "adaptive_batching": True},
    "recipe@80/48": {"lm_sms": 80, "codec_sms": 48},
    "recipe@96/32": {"lm_sms": 96, "codec_sms": 32},
}
# rates per workload: low enough that every candidate passes the first, past every candidate's 90%
RATES = {"libritts": "39:81:3", "seed-tts": "32:120:4", "libritts-long": "6:33:1.5", "chat": "40:240:8"}


def parse_candidate(text: str) -> tuple[str, dict]:
    """`name` from CANDIDATES, or `name=key:value;key:value` for an ad-hoc one (a list: `key:1|2|4`)."""
    if "=" not in text:
        if text not in CANDIDATES:
            raise SystemExit(f"--policies: unknown candidate {text!r}; known: {', '.join(CANDIDATES)} "
                             "(or name=key:value;key:value)")
        return text, CANDIDATES[text]
    name, body = text.split("=", 1)
    changes: dict = {}
    for part in filter(None, body.split(";")):
        key, _, raw = part.partition(":")
        low = raw.lower()
        if "|" in raw:  # a list: decode_buckets:1|2|4
            changes[key] = tuple(int(x) for x in raw.split("|"))
            continue
        changes[key] = True if low == "true" else False if low == "false" else \
            float(raw) if raw.replace(".", "", 1).isdigit() and "." in raw else \
            int(raw) if raw.isdigit() else raw
    return name, changes


def run_one(args, name: str, changes: dict, workload: str) -> dict:
    base = model_config(args.model, "sim", args.gpu, [f"sim_model={args.sim_model}", *args.set])
    cfg = base.replace(**changes) if changes else base
    spec = SweepSpec(rates=parse_rates(args.rates.get(workload, RATES[workload])), duration_s=args.duration,
                     seeds=args.seeds, warmup=64, stop_below=0.90)
    t0 = time.process_time()
    sw = sweep_variant(sim_target(cfg, Variant(name)), Variant(name), spec, load_workload(workload))
    row = {"policy": name, "changes": changes, "workload": workload,
           "cap90": sw.capacity_stats(0.90), "cap99": sw.capacity_stats(0.99),
           "cap90_seeds": sw.seed_capacities(0.90), "cap99_seeds": sw.seed_capacities(0.99),
           "promoted": sum(r.promoted for r in sw.results),
           "deadline_launches": sum(r.deadline_launches for r in sw.results),
           "stalled": sum(r.stalled for r in sw.results), "cpu_s": round(time.process_time() - t0, 1),
           "rates": [r.to_dict() for r in sw.results]}
    print(f"  {workload:13s} {name:12s} @90% {row['cap90']['mean']:5.1f} ± {row['cap90']['std']:4.1f}  "
          f"@99% {row['cap99']['mean']:5.1f} ± {row['cap99']['std']:4.1f}  seeds {row['cap90_seeds']} / "
          f"{row['cap99_seeds']}  ({row['cpu_s']:.0f} CPU s)", flush=True)
    return row


def overload(args, name: str, changes: dict, workload: str, cap: float, mult: float) -> dict:
    base = model_config(args.model, "sim", args.gpu, [f"sim_model={args.sim_model}", *args.set])
    cfg = base.replace(**changes) if changes else base
    rate = round(cap * mult, 1)
    target = sim_target(cfg, Variant(name))
    utts = load_workload(workload)
    records = []
    for k in range(args.seeds):
        records += target.play(schedule(rate, args.duration, 9_000 + k, utts), 900.0)
    target.close()
    r = rate_result(rate, records, args.duration * args.seeds)
    row = {"policy": name, "workload": workload, "multiple": mult, "rate": rate, "capacity90": cap,
           "goodput": r.goodput, "goodput_over_capacity": r.goodput / cap if cap else 0.0,
           "attainment": r.attainment, "rejected": r.rejected, "sent": r.sent}
    print(f"  {workload:13s} {name:12s} offered {mult:g}x = {rate:6.1f}: goodput {r.goodput:5.1f} "
          f"= {row['goodput_over_capacity']:.2f} x capacity, SLO {r.attainment * 100:5.1f}%, "
          f"rejected {r.rejected}/{r.sent}", flush=True)
    return row


def table(rows: list[dict]) -> list[str]:
    out = []
    for wl in dict.fromkeys(r["workload"] for r in rows):
        mine = [r for r in rows if r["workload"] == wl]
        ref = next((r for r in mine if r["policy"] == "paper"), None) or \
            next((r for r in mine if r["policy"] == "deadline"), None)
        out.append(f"{wl}: capacity req/s, mean ± std over seeds (x: ratio to the paper's design, "
                   f"{ref['policy'] if ref else '-'})")
        out.append(f"  {'policy':12s} {'@90%':>13s} {'x':>5s} {'@99%':>13s} {'x':>5s}  promoted  dl-launch  "
                   "stalled")
        for r in mine:
            c90, c99 = r["cap90"], r["cap99"]
            x90 = c90["mean"] / ref["cap90"]["mean"] if ref and ref["cap90"]["mean"] else float("nan")
            x99 = c99["mean"] / ref["cap99"]["mean"] if ref and ref["cap99"]["mean"] else float("nan")
            top = "≥" if c90["at_top"] else " "
            out.append(f"  {r['policy']:12s} {top}{c90['mean']:6.1f} ± {c90['std']:4.1f} {x90:5.2f} "
                       f"{c99['mean']:6.1f} ± {c99['std']:4.1f} {x99:5.2f}  {r['promoted']:8d}  "
                       f"{r['deadline_launches']:9d}  {r['stalled']:7d}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen3-tts-1.7b")
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--sim-model", default="honest")
    ap.add_argument("--policies", default="paper,recipe,gate-pow2,deadline,recipe+uc+ab,recipe@80/48",
                    help=f"comma-separated: {', '.join(CANDIDATES)} or name=key:value;key:value")
    ap.add_argument("--workloads", default="libritts,seed-tts,libritts-long,chat")
    ap.add_argument("--rate", action="append", default=[], metavar="WORKLOAD=RATES",
                    help="rates of one workload (start:stop:step), e.g. libritts=36:60:3")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--overload", default="", help="multiples of each candidate's 90%% capacity, e.g. 1.5,2")
    ap.add_argument("--capacity", action="append", default=[], metavar="WORKLOAD=REQ_S",
                    help="with --overload: the 90%% capacity measured before (skips that workload's sweep)")
    ap.add_argument("--set", action="append", default=[], help="engine override for every candidate")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "policies.json")
    args = ap.parse_args()
    args.rates = dict(x.split("=", 1) for x in args.rate)
    args.capacity = dict(x.split("=", 1) for x in args.capacity)
    cands = [parse_candidate(p) for p in args.policies.split(",") if p]
    rows, over = [], []
    for wl in args.workloads.split(","):
        for name, changes in cands:
            if wl in args.capacity:  # a capacity measured before: only the overload plays
                cap = float(args.capacity[wl])
            else:
                rows.append(run_one(args, name, changes, wl))
                cap = rows[-1]["cap90"]["mean"]
            if args.overload:
                for mult in (float(m) for m in args.overload.split(",")):
                    over.append(overload(args, name, changes, wl, cap, mult))
        print("\n".join(table([r for r in rows if r["workload"] == wl])), flush=True)
    print("\n" + "\n".join(table(rows)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": {k: (str(v) if isinstance(v, Path) else v)
                                              for k, v in vars(args).items()},
                                    "rows": rows, "overload": over}, indent=1))
    print(f"JSON: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
