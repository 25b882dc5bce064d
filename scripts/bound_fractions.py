"""Capacity as a fraction of the model's own bound (voxcli/bound.py), the paper's design beside the shipped
default, per model, in one run (issue 17 part 1).

    nice -n 10 .venv/bin/python scripts/bound_fractions.py --seeds 2 --duration 60 \
        --out out/bound_fractions.json
    nice -n 10 .venv/bin/python scripts/bound_fractions.py --models dia-1.6b --rate dia-1.6b=4:8:0.5

Every sweep: the model's shipped recipe (what `vox bench` and `vox serve` read) on its H100 sim profile
(`--gpu`; the profile's default sim model: honest where the profile has one), LibriTTS test-clean,
open-loop Poisson, `--seeds` arrival seeds x `--duration` s per rate, capacity at 90% / 99% = mean over
the seeds of each seed's own capacity, stopping after the first rate whose pooled attainment is under
`--stop-below`. The bound is the config's own (`config_bound`: its split, its first chunk, the SLO's TTFA),
so `paper` and `default` are each read against theirs. Each row prints the `vox bench` command that
measures the same sweep on its own.

`paper` is the paper's design as the paper built it: deadline-aware admission, decode buckets at powers
of two, the paper's split where the paper serves the model (Qwen3-TTS 100/32 = 96/32 on Hopper's groups of
8, CosyVoice 3 44/88, Higgs v3 100/32), else the recipe's split (Dia: 96/32), a deferral of at most 0.1 s,
and the model's chunk schedule from before issue 17 (Dia's 12/24/48). `default` is the recipe as shipped.
CosyVoice 3's recipe is the paper's design (44/88, deadline, powers of two, 0.1 s): its two rows are one
config (`--policies default` runs it once).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from voxcli.models.registry import sim_spec_for

from voxcli.bench.bounds import config_bound
from voxcli.bench.sweep import SweepSpec, Variant, parse_rates, sweep_variant
from voxcli.bench.targets import model_config, sim_target
from voxcli.bench.workloads import load_workload

ROOT = Path(__file__).resolve().parent.parent
POW2 = [1, 2, 4, 8, 16, 32, 64, 128, 256]

# model -> the paper's design as overrides on top of its recipe (see the docstring)
PAPER: dict[str, dict] = {
    "qwen3-tts-1.7b": {"admission": "deadline", "decode_buckets": POW2, "lm_sms": 96, "codec_sms": 32},
    "dia-1.6b": {"admission": "deadline", "decode_buckets": POW2[1:], "lm_sms": 96, "codec_sms": 32,
                 "max_defer_s": 0.1, "chunk.first": 12, "chunk.ramp": [24], "chunk.steady": 48},
    "cosyvoice3-0.5b": {"admission": "deadline", "decode_buckets": POW2[:8], "lm_sms": 44, "codec_sms": 88,
                        "max_defer_s": 0.1},
    "higgs-v3-4b": {"admission": "deadline", "decode_buckets": POW2[1:], "lm_sms": 100, "codec_sms": 32,
                    "max_defer_s": 0.1},
}
# rates per model: low enough that both pass the first, past both at 90%
RATES = {"qwen3-tts-1.7b": "36:72:3", "dia-1.6b": "3:8:0.5", "cosyvoice3-0.5b": "24:40:2",
         "higgs-v3-4b": "28:64:4"}


def _set_args(changes: dict) -> list[str]:
    """The overrides as `--set key=value` strings (lists in TOML's brackets)."""
    def text(v) -> str:
        return "[" + ",".join(str(x) for x in v) + "]" if isinstance(v, list | tuple) else str(v)
    return [f"{k}={text(v)}" for k, v in changes.items()]


def command(model: str, changes: dict, args, rates: str) -> str:
    sets = " ".join(f"--set {s}" for s in _set_args(changes))
    return (f"vox bench --executor sim --gpu {args.gpu} --model {model} --policy full --rates {rates} "
            f"--duration {args.duration:g} --seeds {args.seeds} --workload {args.workload} {sets}").strip()


def run_one(args, model: str, name: str, changes: dict) -> dict:
    rates = args.rates.get(model, RATES[model])
    cfg = model_config(model, "sim", args.gpu, _set_args(changes) + args.set)
    utts = load_workload(args.workload)
    spec = SweepSpec(rates=parse_rates(rates), duration_s=args.duration, seeds=args.seeds, warmup=64,
                     stop_below=args.stop_below, frame_rate=sim_spec_for(cfg.model).frame_rate)
    bound = config_bound(cfg, utts, spec.frame_rate, ttfa_s=spec.ttfa_target_s)
    t0 = time.process_time()
    sw = sweep_variant(sim_target(cfg, Variant(name)), Variant(name), spec, utts)
    c90, c99 = sw.capacity_stats(0.90), sw.capacity_stats(0.99)
    row = {"model": model, "policy": name, "changes": changes,
           "command": command(model, changes, args, rates), "bound": bound.rps, "binding": bound.binding,
           "lm_bound": bound.lm_rps, "codec_bound": bound.codec_rps,
           "step_cap_ms": bound.step_cap_s * 1e3, "schedule_cap_ms": bound.schedule_cap_s * 1e3,
           "cap90": c90, "cap99": c99, "cap90_seeds": sw.seed_capacities(0.90),
           "cap99_seeds": sw.seed_capacities(0.99),
           "frac90": c90["mean"] / bound.rps if bound.rps else 0.0,
           "frac99": c99["mean"] / bound.rps if bound.rps else 0.0,
           "stalled": sum(r.stalled for r in sw.results), "rejected": sum(r.rejected for r in sw.results),
           "cpu_s": round(time.process_time() - t0, 1), "rates": [r.to_dict() for r in sw.results]}
    print(f"  {model:16s} {name:8s} bound {bound.rps:5.1f} ({bound.binding}) @90% {c90['mean']:5.1f} = "
          f"{row['frac90']:.2f}  @99% {c99['mean']:5.1f} = {row['frac99']:.2f}  seeds {row['cap90_seeds']} / "
          f"{row['cap99_seeds']}  ({row['cpu_s']:.0f} CPU s)\n    {row['command']}", flush=True)
    return row


def table(rows: list[dict]) -> list[str]:
    out = [f"{'model':16s} {'policy':8s} {'bound':>6s} {'binds':8s} {'@90%':>12s} {'/bound':>6s} "
           f"{'@99%':>12s} {'/bound':>6s}"]
    for r in rows:
        c90, c99 = r["cap90"], r["cap99"]
        top = "≥" if c90["at_top"] else " "
        out.append(f"{r['model']:16s} {r['policy']:8s} {r['bound']:6.1f} {r['binding']:8s} "
                   f"{top}{c90['mean']:5.1f} ± {c90['std']:3.1f} {r['frac90']:6.2f} "
                   f"{c99['mean']:6.1f} ± {c99['std']:3.1f} {r['frac99']:6.2f}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(PAPER))
    ap.add_argument("--policies", default="paper,default", help="paper and/or default")
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--workload", default="libritts")
    ap.add_argument("--rate", action="append", default=[], metavar="MODEL=RATES",
                    help="rates of one model (start:stop:step), e.g. dia-1.6b=4:8:0.5")
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--stop-below", type=float, default=0.8,
                    help="stop after the first rate whose pooled attainment is under this")
    ap.add_argument("--set", action="append", default=[], help="engine override for every sweep")
    ap.add_argument("--out", type=Path, default=ROOT / "out" / "bound_fractions.json")
    args = ap.parse_args()
    args.rates = dict(x.split("=", 1) for x in args.rate)
    rows = []
    for model in filter(None, args.models.split(",")):
        if model not in PAPER:
            raise SystemExit(f"--models: no paper design for {model!r}; known: {', '.join(PAPER)}")
        for name in filter(None, args.policies.split(",")):
            if name not in ("paper", "default"):
                raise SystemExit(f"--policies: {name!r} is neither paper nor default")
            rows.append(run_one(args, model, name, PAPER[model] if name == "paper" else {}))
    print("\ncapacity req/s, mean ± std over seeds, and capacity / bound (voxcli/bound.py)")
    print("\n".join(table(rows)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": {k: (str(v) if isinstance(v, Path) else v)
                                              for k, v in vars(args).items()}, "rows": rows}, indent=1))
    print(f"JSON: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
