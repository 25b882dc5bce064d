"""Run an experiment plan (voxcli/bench/plan.py) on the simulator and print its tables.

Contract: `run_plan(plan, say)` runs every sweep of `plan.runs()` (one fresh sim engine per candidate and
workload, `vox bench`'s sweep: an uncounted warm-up burst, then the rates back to back, `plan.seeds`
arrival seeds per rate, stopping by the plan's rules), then the [overload] offers, calling `say` with a line
per finished sweep and the tables at the end; it returns the JSON-able result. Capacity at 90% / 99% is the
mean over the seeds of each seed's own capacity; the bound is the config's own (`config_bound`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from voxcli.bench.bounds import config_bound
from voxcli.bench.client import burst, schedule
from voxcli.bench.metrics import rate_result
from voxcli.bench.plan import Candidate, Plan
from voxcli.bench.sweep import SweepSpec, Variant, sweep_variant
from voxcli.bench.targets import sim_target
from voxcli.bench.workloads import load_workload
from voxcli.models.registry import sim_spec_for

OVERLOAD_SEED = 9_000  # the overload offers draw arrivals apart from every sweep's


def sweep_spec(plan: Plan, c: Candidate, workload: str, frame_rate: float) -> SweepSpec:
    return SweepSpec(rates=c.rates_for(workload), duration_s=plan.duration, seed=plan.seed, seeds=plan.seeds,
                     warmup=plan.warmup, stop_rule=plan.stop_rule, stop_below=plan.stop_below,
                     frame_rate=frame_rate, arrivals=plan.arrivals)


def sweep_row(plan: Plan, c: Candidate, workload: str) -> dict[str, Any]:
    """One candidate swept on one workload: its capacities, bound, late-chunk counts and every rate."""
    cfg = plan.config(c)
    frame_rate = sim_spec_for(cfg.model).frame_rate
    spec = sweep_spec(plan, c, workload, frame_rate)
    utts = load_workload(workload)
    t0 = time.process_time()
    target = sim_target(cfg, Variant(c.name), plan.seed)
    try:
        sw = sweep_variant(target, Variant(c.name), spec, utts)
    finally:
        target.close()
    b = config_bound(cfg, utts, frame_rate, ttfa_s=spec.ttfa_target_s)
    return {"candidate": c.name, "workload": workload, "model": cfg.model, "gpu": cfg.gpu,
            "overrides": c.overrides, "cap90": sw.capacity_stats(0.90), "cap99": sw.capacity_stats(0.99),
            "cap90_seeds": sw.seed_capacities(0.90), "cap99_seeds": sw.seed_capacities(0.99),
            "bound": {"rps": b.rps, "binding": b.binding, "lm_rps": b.lm_rps, "codec_rps": b.codec_rps}
            if b is not None else None,
            "promoted": sum(r.promoted for r in sw.results),
            "deadline_launches": sum(r.deadline_launches for r in sw.results),
            "slack_cuts": sum(r.slack_cuts for r in sw.results),
            "stalled": sum(r.stalled for r in sw.results), "rejected": sum(r.rejected for r in sw.results),
            "stopped_after": sw.stopped_after, "cpu_s": round(time.process_time() - t0, 1),
            "rates": [r.to_dict() for r in sw.results]}


def overload_row(plan: Plan, c: Candidate, workload: str, cap: float, multiple: float) -> dict[str, Any]:
    """`c` offered `multiple` x `cap` req/s on `workload`: goodput against the capacity, seeds pooled."""
    ov = plan.overload
    assert ov is not None
    cfg = plan.config(c)
    frame_rate = sim_spec_for(cfg.model).frame_rate
    rate = round(cap * multiple, 1)
    seeds = ov.seeds or plan.seeds
    utts = load_workload(workload)
    target = sim_target(cfg, Variant(c.name), plan.seed)
    records = []
    try:
        if ov.warmup:
            target.play(burst(ov.warmup, utts, plan.seed, frame_rate), 900.0)
        for k in range(seeds):
            records += target.play(schedule(rate, plan.duration, OVERLOAD_SEED + k, utts, frame_rate), 900.0)
    finally:
        target.close()
    r = rate_result(rate, records, plan.duration * seeds)
    return {"candidate": c.name, "workload": workload, "multiple": multiple, "rate": rate, "capacity90": cap,
            "goodput": r.goodput, "goodput_over_capacity": r.goodput / cap if cap else 0.0,
            "attainment": r.attainment, "completed_rps": r.completed_rps, "rejected": r.rejected,
            "sent": r.sent, "seeds": seeds, "stalled": r.stalled, "ttfa_p50": r.ttfa_p50,
            "ttfa_p99": r.ttfa_p99}


def run_plan(plan: Plan, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Every sweep, then every overload offer; `say` gets a line as each ends and the tables at the end."""
    if plan.report == "breakdown":
        from voxcli.bench.breakdown import breakdown_lines, ttfa_breakdown

        rows = []
        for c, wl in plan.runs():
            for rate in c.rates_for(wl):
                got = ttfa_breakdown(plan.config(c), load_workload(wl), rate, plan.duration, plan.seed,
                                     plan.warmup)
                rows.append({"candidate": c.name, "workload": wl} | got)
                for line in breakdown_lines(f"{c.name}: {wl}", got):
                    say(line)
        return {"plan": plan.name, "rows": rows}
    rows: list[dict[str, Any]] = []
    for c, wl in plan.runs():
        rows.append(sweep_row(plan, c, wl))
        say(progress_line(rows[-1], max(len(c.name) for c in plan.candidates)))
    over = []
    if plan.overload is not None:
        for name in plan.overload.candidates:
            c = plan.candidate(name)
            source = plan.overload.capacity_of or name
            for row in [r for r in rows if r["candidate"] == source]:
                for m in plan.overload.multiples:
                    over.append(overload_row(plan, c, row["workload"], row["cap90"]["mean"], m))
                    say(overload_lines(over[-1:])[0])
    if "rates" in plan.tables:
        say("\n".join(rate_lines(rows)))
    if "capacity" in plan.tables:
        say("\n".join(capacity_lines(rows, plan.reference)))
    if over:
        say("past capacity (goodput / 90% capacity):\n" + "\n".join(overload_lines(over)))
    return {"plan": plan.name, "title": plan.title, "rows": rows, "overload": over}


def progress_line(r: dict[str, Any], width: int = 24) -> str:
    c90, c99 = r["cap90"], r["cap99"]
    return (f"  {r['workload']:13s} {r['candidate']:{width}s} @90% {c90['mean']:5.1f} ± {c90['std']:4.1f}  "
            f"@99% {c99['mean']:5.1f} ± {c99['std']:4.1f}  seeds {r['cap90_seeds']} / {r['cap99_seeds']}  "
            f"({r['cpu_s']:.0f} CPU s)")


def capacity_lines(rows: list[dict[str, Any]], reference: str = "") -> list[str]:
    """Per workload: capacity mean ± std over seeds, the ratio to `reference`, the bound and the fraction
    of it reached, the late-chunk counts (the table `vox bench --plan experiments/sweep_policies.toml`
    prints)."""
    out = []
    w = max([24, *(len(r["candidate"]) for r in rows)])
    for wl in dict.fromkeys(r["workload"] for r in rows):
        mine = [r for r in rows if r["workload"] == wl]
        ref = next((r for r in mine if r["candidate"] == reference), None)
        ratio_to = ref["candidate"] if ref else "-"
        out.append(f"{wl}: capacity req/s, mean ± std over seeds (x: ratio to {ratio_to}; ≥: some seed "
                   "passed the top rate)")
        out.append(f"  {'candidate':{w}s} {'@90%':>13s} {'x':>5s} {'@99%':>13s} {'x':>5s}  bound (binds)    "
                   "/bound 90 99  promoted  dl-launch  slack-cut  stalled")
        for r in mine:
            c90, c99 = r["cap90"], r["cap99"]
            x90 = c90["mean"] / ref["cap90"]["mean"] if ref and ref["cap90"]["mean"] else float("nan")
            x99 = c99["mean"] / ref["cap99"]["mean"] if ref and ref["cap99"]["mean"] else float("nan")
            t90, t99 = ("≥" if c["at_top"] else " " for c in (c90, c99))
            b = r["bound"] or {"rps": float("nan"), "binding": "-"}
            f90, f99 = (c["mean"] / b["rps"] if b["rps"] else float("nan") for c in (c90, c99))
            out.append(f"  {r['candidate']:{w}s} {t90}{c90['mean']:6.1f} ± {c90['std']:4.1f} {x90:5.2f} "
                       f"{t99}{c99['mean']:5.1f} ± {c99['std']:4.1f} {x99:5.2f}  {b['rps']:5.1f} "
                       f"({b['binding']:8s}) {f90:5.2f} {f99:4.2f}  {r['promoted']:8d}  "
                       f"{r['deadline_launches']:9d}  {r['slack_cuts']:9d}  {r['stalled']:7d}")
        for q in ("cap90", "cap99"):
            top = max(r[q]["mean"] for r in mine)
            tied = [r["candidate"] for r in mine if r[q]["mean"] >= top - 1e-9]
            out.append(f"  best at {q[3:]}%: {', '.join(tied)} ({top:.1f})")
    return out


def rate_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Every rate of every sweep, seeds pooled: SLO attainment, stalls, the late-chunk path's counts."""
    w = max([9, *(len(r["candidate"]) for r in rows)])
    out = [f"  {'workload':13s} {'candidate':{w}s} {'req/s':>6s}  {'SLO %':>5s}  stalled/sent  promoted  "
           "dl-launch  slack-cut  rejected  TTFA p50 ms"]
    for r in rows:
        for x in r["rates"]:
            out.append(f"  {r['workload']:13s} {r['candidate']:{w}s} {x['rate']:6g}  "
                       f"{x['attainment'] * 100:5.1f}  {x['stalled']:5d}/{x['sent']:<6d}  "
                       f"{x['promoted']:8d}  "
                       f"{x['deadline_launches']:9d}  {x['slack_cuts']:9d}  {x['rejected']:8d}  "
                       f"{(x['ttfa_p50'] or 0) * 1e3:11.0f}")
    return out


def overload_lines(over: list[dict[str, Any]]) -> list[str]:
    w = max([9, *(len(o["candidate"]) for o in over)])
    return [f"  {o['workload']:13s} {o['candidate']:{w}s} offered {o['multiple']:g}x {o['capacity90']:.1f} = "
            f"{o['rate']:6.1f}: goodput {o['goodput']:5.1f} = {o['goodput_over_capacity']:.2f} x capacity, "
            f"SLO {o['attainment'] * 100:5.1f}%, completed {o['completed_rps']:5.1f}/s, rejected "
            f"{o['rejected']}/{o['sent']}, stalled {o['stalled']}, TTFA p50 "
            f"{(o['ttfa_p50'] or 0) * 1e3:.0f} ms"
            for o in over]
