"""Which policy should ship: candidate policies side by side, per workload, in one run (issue 17 part 2).

    nice -n 10 .venv/bin/python scripts/sweep_policies.py --seeds 3 --duration 60 --out out/policies.json
    nice -n 10 .venv/bin/python scripts/sweep_policies.py --workloads libritts --policies recipe,paper \
        --rate paper@libritts=38:62:4 --rate libritts=58:94:4 --overload 1.5,2 --overload-policies recipe
    nice -n 10 .venv/bin/python scripts/sweep_policies.py --tables out/final/*.json

Every sweep runs the shipped recipe (`--model`, default qwen3-tts-1.7b: what `vox bench` and `vox serve`
read) on the honest sim (`--gpu`, default h100) with the candidate's overrides on top, LibriTTS /
Seed-TTS / libritts-long / chat, open-loop Poisson, `--seeds` arrival seeds x `--duration` s per rate,
capacity at 90% / 99% = mean over the seeds of each seed's own capacity (the rates start low enough that
every candidate passes the first one; a candidate may sweep its own range, `--rate NAME@WORKLOAD=...`,
and still meets the same arrivals as the others at a rate: `rate_seed`). One table per workload: capacity,
its spread, and the ratio to the paper's design (`paper`, else `deadline`). `--overload` then offers each
candidate multiples of its own 90% capacity and prints goodput / capacity (the issue's check: >= 0.9 past
capacity).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from voxcli.models.registry import sim_spec_for

from voxcli.bench.bounds import config_bound
from voxcli.bench.client import burst, schedule
from voxcli.bench.metrics import rate_result, should_stop
from voxcli.bench.sweep import Variant, VariantSweep, parse_rates
from voxcli.bench.targets import model_config, sim_target
from voxcli.bench.workloads import load_workload

ROOT = Path(__file__).resolve().parent.parent

# name -> overrides on top of the recipe (`--model`). `paper` is the paper's design as the paper built
# it (deadline admission, decode graphs at powers of two, 96/32, every chunk 10 frames); `before` is the
# recipe shipped before this sweep (TTFA gate, decode buckets every 16 rows past 32, 88/40, 10-frame
# chunks); `recipe` is whatever the recipe says now. The others keep the recipe's settings but the ones
# they name. Every one that fixes a chunk schedule names all three fields (an explicit schedule replaces
# the model's whole).
POW2 = (1, 2, 4, 8, 16, 32, 64, 128, 256)
FINE = (1, 2, 4, 8, 16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256)
CHUNK10 = {"chunk.first": 10, "chunk.ramp": (), "chunk.steady": 10}  # the paper's Qwen3-TTS chunks
CANDIDATES: dict[str, dict] = {
    # the paper's design as the paper built it (its 100/32 is 96/32 on Hopper's groups of 8)
    "paper": {"admission": "deadline", "decode_buckets": POW2, "lm_sms": 96, "codec_sms": 32, **CHUNK10},
    "before": {"admission": "ttfa-gate", "decode_buckets": FINE, "lm_sms": 88, "codec_sms": 40, **CHUNK10},
    "before@80/48": {"admission": "ttfa-gate", "decode_buckets": FINE, "lm_sms": 80, "codec_sms": 48,
                     **CHUNK10},
    # the shipped recipe before issue 17 (with today's gate)
    "gate-pow2": {"admission": "ttfa-gate", "decode_buckets": POW2, "lm_sms": 96, "codec_sms": 32, **CHUNK10},
    "recipe": {},  # whatever the shipped recipe says now
    # the issue-17 sweep's candidates, as it measured them (they name every setting the recipe changed
    # since, so they stay what the tables say): the recipe without urgency chunking / adaptive batching,
    # and that with the paper's admission, with 80/48, with both flags (what the recipe ships now)
    "recipe-uc-ab": {"urgency_chunking": False, "adaptive_batching": False},
    "deadline": {"admission": "deadline", "urgency_chunking": False, "adaptive_batching": False},
    "recipe@80/48": {"lm_sms": 80, "codec_sms": 48, "urgency_chunking": False, "adaptive_batching": False},
    "recipe+uc+ab": {"urgency_chunking": True, "adaptive_batching": True},
    "recipe+uc": {"urgency_chunking": True, "adaptive_batching": False},
    "recipe@88/40": {"lm_sms": 88, "codec_sms": 40},
    "recipe+chunk10": CHUNK10,  # the recipe with the paper's 10-frame first chunk
    # the Qwen3-TTS program's own schedule (models/qwen3_tts/spec.py): 1 frame first, then 2, 4, 8, 10
    "recipe+chunk1": {"chunk.first": 1, "chunk.ramp": (2, 4, 8), "chunk.steady": 10},
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
        if "|" in raw or key.endswith(("ramp", "buckets")):  # a list: decode_buckets:1|2|4, chunk.ramp:8
            changes[key] = tuple(int(x) for x in raw.split("|") if x)
            continue
        changes[key] = True if low == "true" else False if low == "false" else \
            float(raw) if raw.replace(".", "", 1).isdigit() and "." in raw else \
            int(raw) if raw.isdigit() else raw
    return name, changes


def rate_seed(k: int, rate: float) -> int:
    """The arrival draw of seed `k` at `rate`: a function of the rate's value, not of its place in the
    list, so every candidate meets the very same arrivals at a rate whatever range it sweeps (common
    random numbers: a difference between candidates is theirs, not the draw's)."""
    return k * 1_000_003 + round(rate * 100)


def sweep_candidate(target, name: str, rates: list[float], duration: float, seeds: int,
                    utterances: list) -> VariantSweep:
    """`vox bench`'s sweep (one engine plays every rate back to back after a 64-request warm-up; stop
    after the first rate under 90% attainment over the seeds pooled, or when under half get audio
    within 1 s) with the arrivals of `rate_seed`."""
    out = VariantSweep(Variant(name))
    out.per_seed = [[] for _ in range(seeds)]
    target.play(burst(64, utterances, 0), 900.0)
    for rate in rates:
        records, counts = [], {}
        for k in range(seeds):
            mine = target.play(schedule(rate, duration, rate_seed(k, rate), utterances), 900.0)
            records += mine
            one = rate_result(rate, mine, duration)
            for key, v in target.counts.items():
                counts[key] = counts.get(key, 0) + v
            one.promoted, one.deadline_launches, one.slack_cuts = (
                target.counts.get(x, 0) for x in ("promoted", "deadline_launches", "slack_cuts"))
            out.per_seed[k].append(one)
        res = rate_result(rate, records, duration * seeds)
        res.promoted, res.deadline_launches, res.slack_cuts = (
            counts.get(x, 0) for x in ("promoted", "deadline_launches", "slack_cuts"))
        out.results.append(res)
        if should_stop(res) or res.attainment < 0.90:
            out.stopped_after = rate
            break
    target.close()
    return out


def rates_for(args, name: str, workload: str) -> list[float]:
    """`--rate NAME@WORKLOAD=...` (one candidate), else `--rate WORKLOAD=...`, else RATES."""
    text = args.rates.get(f"{name}@{workload}") or args.rates.get(workload) or RATES[workload]
    return parse_rates(text)


def candidate_config(args, changes: dict):
    base = model_config(args.model, "sim", args.gpu, [f"sim_model={args.sim_model}", *args.set])
    return base.with_overrides(changes)  # `chunk.first` reaches into the schedule


def bound_of(args, changes: dict, workload: str) -> dict:
    """The cost profile's own bound (voxcli/bound.py) for the candidate's split on the workload."""
    cfg = candidate_config(args, changes)
    b = config_bound(cfg, load_workload(workload), sim_spec_for(cfg.model).frame_rate)
    return {"rps": b.rps, "binding": b.binding, "lm_rps": b.lm_rps, "codec_rps": b.codec_rps}


def run_one(args, name: str, changes: dict, workload: str) -> dict:
    cfg = candidate_config(args, changes)
    t0 = time.process_time()
    sw = sweep_candidate(sim_target(cfg, Variant(name)), name, rates_for(args, name, workload),
                         args.duration, args.seeds, load_workload(workload))
    row = {"policy": name, "changes": changes, "workload": workload,
           "cap90": sw.capacity_stats(0.90), "cap99": sw.capacity_stats(0.99),
           "cap90_seeds": sw.seed_capacities(0.90), "cap99_seeds": sw.seed_capacities(0.99),
           "promoted": sum(r.promoted for r in sw.results),
           "deadline_launches": sum(r.deadline_launches for r in sw.results),
           "slack_cuts": sum(r.slack_cuts for r in sw.results), "bound": bound_of(args, changes, workload),
           "stalled": sum(r.stalled for r in sw.results), "cpu_s": round(time.process_time() - t0, 1),
           "rates": [r.to_dict() for r in sw.results]}
    print(f"  {workload:13s} {name:12s} @90% {row['cap90']['mean']:5.1f} ± {row['cap90']['std']:4.1f}  "
          f"@99% {row['cap99']['mean']:5.1f} ± {row['cap99']['std']:4.1f}  seeds {row['cap90_seeds']} / "
          f"{row['cap99_seeds']}  ({row['cpu_s']:.0f} CPU s)", flush=True)
    return row


def overload(args, name: str, changes: dict, workload: str, cap: float, mult: float) -> dict:
    cfg = candidate_config(args, changes)
    rate = round(cap * mult, 1)
    target = sim_target(cfg, Variant(name))
    utts = load_workload(workload)
    records = []
    seeds = args.overload_seeds or args.seeds
    target.play(burst(64, utts, 0), 900.0)
    for k in range(seeds):
        records += target.play(schedule(rate, args.duration, 9_000 + k, utts), 900.0)
    target.close()
    r = rate_result(rate, records, args.duration * seeds)
    row = {"policy": name, "workload": workload, "multiple": mult, "rate": rate, "capacity90": cap,
           "goodput": r.goodput, "goodput_over_capacity": r.goodput / cap if cap else 0.0,
           "attainment": r.attainment, "rejected": r.rejected, "sent": r.sent, "seeds": seeds,
           "stalled": r.stalled, "ttfa_p99": r.ttfa_p99}
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
                   f"{ref['policy'] if ref else '-'}; ≥: some seed passed the top rate)")
        out.append(f"  {'policy':14s} {'@90%':>13s} {'x':>5s} {'@99%':>13s} {'x':>5s}  bound (binds)    "
                   "/bound 90 99  promoted  dl-launch  slack-cut  stalled")
        for r in mine:
            c90, c99 = r["cap90"], r["cap99"]
            x90 = c90["mean"] / ref["cap90"]["mean"] if ref and ref["cap90"]["mean"] else float("nan")
            x99 = c99["mean"] / ref["cap99"]["mean"] if ref and ref["cap99"]["mean"] else float("nan")
            t90, t99 = ("≥" if c["at_top"] else " " for c in (c90, c99))
            b = r.get("bound") or {"rps": float("nan"), "binding": "-"}
            out.append(f"  {r['policy']:14s} {t90}{c90['mean']:6.1f} ± {c90['std']:4.1f} {x90:5.2f} "
                       f"{t99}{c99['mean']:5.1f} ± {c99['std']:4.1f} {x99:5.2f}  {b['rps']:5.1f} "
                       f"({b['binding']:8s}) {c90['mean'] / b['rps']:5.2f} {c99['mean'] / b['rps']:4.2f}"
                       f"  {r['promoted']:8d}  "
                       f"{r['deadline_launches']:9d}  {r.get('slack_cuts', 0):9d}  {r['stalled']:7d}")
        for q in ("cap90", "cap99"):
            top = max(r[q]["mean"] for r in mine)
            tied = [r["policy"] for r in mine if r[q]["mean"] >= top - 1e-9]
            out.append(f"  best at {q[3:]}%: {', '.join(tied)} ({top:.1f})")
    return out


def overload_lines(over: list[dict]) -> list[str]:
    return [f"  {o['workload']:13s} {o['policy']:14s} offered {o['multiple']:g}x {o['capacity90']:.1f} = "
            f"{o['rate']:6.1f}: goodput {o['goodput']:5.1f} = {o['goodput_over_capacity']:.2f} x capacity, "
            f"SLO {o['attainment'] * 100:5.1f}%, rejected {o['rejected']}/{o['sent']}" for o in over]


def print_saved(paths: list[Path]) -> int:
    """`--tables A.json B.json ...`: the tables of runs saved before (e.g. one process per workload)."""
    rows, over = [], []
    for path in paths:
        data = json.loads(path.read_text())
        rows += data["rows"]
        over += data.get("overload", [])
        a = data["args"]
        saved = argparse.Namespace(**{**a, "set": a.get("set", [])})
        for r in data["rows"]:
            r.setdefault("bound", bound_of(saved, r["changes"], r["workload"]))
        print(f"{path}: --seeds {a['seeds']} --duration {a['duration']} --gpu {a['gpu']} "
              f"--sim-model {a['sim_model']} --model {a['model']}")
    print("\n".join(table(rows)))
    if over:
        print("past capacity (goodput / 90% capacity):\n" + "\n".join(overload_lines(over)))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen3-tts-1.7b")
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--sim-model", default="honest")
    ap.add_argument("--policies", default="recipe,paper,before,recipe-uc-ab,deadline,recipe@80/48",
                    help=f"comma-separated: {', '.join(CANDIDATES)} or name=key:value;key:value")
    ap.add_argument("--workloads", default="libritts,seed-tts,libritts-long,chat")
    ap.add_argument("--rate", action="append", default=[], metavar="[POLICY@]WORKLOAD=RATES",
                    help="rates of one workload (start:stop:step), e.g. libritts=36:60:3, or of one "
                         "candidate on it: paper@libritts=36:60:3")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--overload", default="", help="multiples of each candidate's 90%% capacity, e.g. 1.5,2")
    ap.add_argument("--overload-policies", default="", help="with --overload: only these candidates")
    ap.add_argument("--overload-seeds", type=int, default=0, help="with --overload: seeds (0 = --seeds)")
    ap.add_argument("--capacity", action="append", default=[], metavar="WORKLOAD=REQ_S",
                    help="with --overload: the 90%% capacity measured before (skips that workload's sweep)")
    ap.add_argument("--set", action="append", default=[], help="engine override for every candidate")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "policies.json")
    ap.add_argument("--tables", type=Path, nargs="+", help="print the tables of saved JSON runs and exit")
    args = ap.parse_args()
    if args.tables:
        return print_saved(args.tables)
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
            if args.overload and (not args.overload_policies or name in args.overload_policies.split(",")):
                for mult in (float(m) for m in args.overload.split(",")):
                    over.append(overload(args, name, changes, wl, cap, mult))
            save(args, rows, over)  # after every candidate: a long run killed late keeps what it measured
        print("\n".join(table([r for r in rows if r["workload"] == wl])), flush=True)
    print("\n" + "\n".join(table(rows)))
    if over:
        print("past capacity (goodput / 90% capacity):\n" + "\n".join(overload_lines(over)))
    print(f"JSON: {args.out}")
    return 0


def save(args, rows: list[dict], over: list[dict]) -> None:
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": {k: (str(v) if isinstance(v, Path) else v)
                                              for k, v in vars(args).items()},
                                    "rows": rows, "overload": over}, indent=1))


if __name__ == "__main__":
    sys.exit(main())
