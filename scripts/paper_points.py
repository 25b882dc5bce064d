"""The paper's points, overload and the beyond-the-paper ideas, side by side in one run (issue 10).

    .venv/bin/python scripts/paper_points.py --duration 10 --seeds 3 --out out/paper_points.json
    .venv/bin/python scripts/paper_points.py --parts paper --sim-models optimistic,honest

Parts (each prints a table as it goes and lands in the JSON):
  paper     the calibration's checks (scripts/calibrate_sim.py CHECKS: full 100/32, sync2, lanes = no
            split, 116/16, 108/24, 76/56, prefill-first, B200) with the paper's design (deadline
            admission) under each sim model, and under the new default admission (ttfa-gate, honest);
            capacity at 90% / 99% = mean over the seeds of each seed's own capacity
  overload  prefill-first, deadline and ttfa-gate offered 1.5x and 2x the paper design's honest capacity:
            attainment, goodput, completed req/s, rejected
  beyond    the paper's full (deadline) against ttfa-gate, + urgency chunking, + adaptive batching, + both,
            in the honest sim
  workloads libritts-long and chat: the paper's full against the new default (+ urgency chunking)
Every sweep: LibriTTS test-clean unless said, open-loop Poisson, rates --rates (stopping at the first
rate under 90% pooled attainment: capacity needs no rate past it), chunks of 10 frames.
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
from voxcli.bench.targets import sim_target
from voxcli.bench.workloads import load_workload

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibrate_sim import CHECKS, paper_config  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def sweep(label: str, gpu: str, changes: dict, args, workload: str = "libritts", rates: str = "") -> dict:
    cfg = paper_config(gpu, **{"sim_model": "honest", **changes}).with_overrides(args.set)
    spec = SweepSpec(rates=parse_rates(rates or args.rates), duration_s=args.duration, seeds=args.seeds,
                     warmup=64, stop_below=0.90)
    t0 = time.perf_counter()
    sw = sweep_variant(sim_target(cfg, Variant(label)), Variant(label), spec, load_workload(workload))
    c90, c99 = sw.capacity_stats(0.90), sw.capacity_stats(0.99)
    row = {"label": label, "gpu": gpu, "changes": changes, "workload": workload,
           "cap90": c90, "cap99": c99, "cap90_seeds": sw.seed_capacities(0.9),
           "cap99_seeds": sw.seed_capacities(0.99), "cpu_s": round(time.perf_counter() - t0, 1)}
    print(f"  {label:44s} {workload:13s} @90% {c90['mean']:5.1f} ± {c90['std']:4.1f}   "
          f"@99% {c99['mean']:5.1f} ± {c99['std']:4.1f}   seeds {row['cap90_seeds']} / {row['cap99_seeds']}"
          f"   ({row['cpu_s']:.0f} s)", flush=True)
    return row


def one_rate(label: str, changes: dict, rate: float, args) -> dict:
    cfg = paper_config("h100", **{"sim_model": "honest", **changes}).with_overrides(args.set)
    target = sim_target(cfg, Variant(label))
    utts = load_workload("libritts")
    records = []
    for k in range(args.seeds):
        records += target.play(schedule(rate, args.duration, 9_000 + k, utts), 900.0)
    target.close()
    r = rate_result(rate, records, args.duration * args.seeds)
    done_rps = r.completed / (args.duration * args.seeds)  # per second of arrivals (seeds pooled)
    row = {"label": label, "rate": rate, "attainment": r.attainment, "goodput": r.goodput,
           "completed_rps": done_rps, "rejected": r.rejected, "sent": r.sent,
           "ttfa_p50": r.ttfa_p50, "stalled": r.stalled}
    print(f"  {label:34s} offered {rate:6.1f}: SLO {r.attainment * 100:5.1f}%  goodput {r.goodput:5.1f}  "
          f"completed {done_rps:5.1f}/s  rejected {r.rejected:4d}/{r.sent}  stalled {r.stalled}  "
          f"TTFA p50 {(r.ttfa_p50 or 0) * 1e3:5.0f} ms", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--rates", default="2:100:2")
    ap.add_argument("--long-rates", default="1:40:1", help="rates of the libritts-long sweeps")
    ap.add_argument("--chat-rates", default="10:200:5", help="rates of the chat sweeps")
    ap.add_argument("--parts", default="paper,overload,beyond,workloads")
    ap.add_argument("--sim-models", default="optimistic,honest")
    ap.add_argument("--only", default="", help="paper part: comma-separated substrings of check labels")
    ap.add_argument("--no-gate", action="store_true", help="paper part: skip the ttfa-gate rows")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an EngineConfig override on every run (e.g. slack_cap=false for the ablation)")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "paper_points.json")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    res: dict = {"args": vars(args) | {"out": str(args.out)}}
    deadline = {"admission": "deadline"}
    gate = {"admission": "ttfa-gate"}
    only = [x for x in args.only.split(",") if x]
    checks = [c for c in CHECKS if not only or any(x in c[0] for x in only)]
    if "paper" in parts:
        print("paper points (the paper's design: deadline admission unless the check says otherwise)")
        rows = []
        for model in args.sim_models.split(","):
            for label, gpu, changes, pub90, pub99, _ in checks:
                row = sweep(f"{label} [{model}]", gpu, {**deadline, **changes, "sim_model": model}, args)
                rows.append(row | {"pub90": pub90, "pub99": pub99, "sim_model": model})
        print("paper points under the new default admission (ttfa-gate), honest sim")
        for label, gpu, changes, pub90, pub99, _ in ([] if args.no_gate else checks):
            if changes.get("admission"):
                continue
            row = sweep(f"{label} [honest, ttfa-gate]", gpu, {**gate, **changes, "sim_model": "honest"}, args)
            rows.append(row | {"pub90": pub90, "pub99": pub99, "sim_model": "honest+gate"})
        res["paper"] = rows
    if "overload" in parts:
        base = sweep("full 100/32 deadline [honest]", "h100", deadline, args)
        cap = base["cap90"]["mean"]
        print(f"past capacity: 1.5x and 2x the paper design's honest capacity {cap:g} req/s")
        rows = []
        for mult in (1.5, 2.0):
            for label, ch in (("prefill-first", {"admission": "prefill-first"}), ("deadline", deadline),
                              ("ttfa-gate", gate), ("ttfa-gate + urgency chunking",
                                                    {**gate, "urgency_chunking": True})):
                rows.append(one_rate(label, ch, round(cap * mult, 1), args) | {"multiple": mult})
        res["overload"] = {"capacity": base, "rows": rows}
    if "beyond" in parts:
        print("beyond the paper (honest sim, h100 100/32)")
        res["beyond"] = [
            sweep("full (paper: deadline admission)", "h100", deadline, args),
            sweep("ttfa-gate", "h100", gate, args),
            sweep("ttfa-gate + urgency chunking", "h100", {**gate, "urgency_chunking": True}, args),
            sweep("ttfa-gate + adaptive batching", "h100", {**gate, "adaptive_batching": True}, args),
            sweep("ttfa-gate + both", "h100", {**gate, "urgency_chunking": True, "adaptive_batching": True},
                  args),
        ]
    if "workloads" in parts:
        print("workloads (honest sim, h100 100/32)")
        rows = []
        for wl, rates in (("libritts-long", args.long_rates), ("chat", args.chat_rates)):
            rows.append(sweep("full (paper: deadline admission)", "h100", deadline, args, wl, rates))
            rows.append(sweep("ttfa-gate", "h100", gate, args, wl, rates))
            rows.append(sweep("ttfa-gate + urgency chunking", "h100", {**gate, "urgency_chunking": True},
                              args, wl, rates))
        res["workloads"] = rows
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1))
    print(f"JSON: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
