"""Run an experiment plan (voxcli/bench/plan.py) on the simulator and print its tables.

Contract: `run_plan(plan, say)` runs every sweep of `plan.runs()` (one fresh sim engine per candidate and
workload, `vox bench`'s sweep: an uncounted warm-up burst, then the rates back to back, `plan.seeds`
arrival seeds per rate, stopping by the plan's rules), then the [overload] offers, calling `say` with a line
per finished sweep and the tables (figure tables) at the end; it returns the JSON-able result. Capacity at
90% / 99% is the mean over the seeds of each seed's own capacity; the bound is the config's own
(`config_bound`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from voxcli.bench.client import burst, schedule
from voxcli.bench.metrics import rate_result
from voxcli.bench.plan import Candidate, Plan
from voxcli.bench.sweep import SweepSpec, Variant, sweep_variant
from voxcli.bench.targets import sim_target
from voxcli.bench.workloads import load_workload
from voxcli.models.registry import sim_spec_for
from voxcli.sim.config_bound import config_bound

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


def run_plan(plan: Plan, say: Callable[[Any], None] = print) -> dict[str, Any]:
    """Every sweep, then every overload offer; `say` gets a line as each ends and the tables (rich
    renderables, voxcli/tables.py: printed by a rich console, they fit its width) at the end."""
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
        say(progress_line(rows[-1]))
    over = []
    if plan.overload is not None:
        for name in plan.overload.candidates:
            c = plan.candidate(name)
            source = plan.overload.capacity_of or name
            for row in [r for r in rows if r["candidate"] == source]:
                for m in plan.overload.multiples:
                    over.append(overload_row(plan, c, row["workload"], row["cap90"]["mean"], m))
                    say(overload_line(over[-1]))
    if "rates" in plan.tables:
        say(rate_table(rows))
    if "capacity" in plan.tables:
        for part in capacity_tables(rows, plan.reference):
            say(part)
    if over:
        say(overload_table(over))
    return {"plan": plan.name, "title": plan.title, "rows": rows, "overload": over}


PROGRESS_WIDTH = 78  # an 80-column terminal, less a margin


def progress_line(r: dict[str, Any]) -> str:
    """One finished sweep in one line, or two when the candidate's name is long (a terminal would break
    the line anywhere): short enough for an 80-column terminal (each seed's capacity is in the JSON)."""
    c90, c99 = r["cap90"], r["cap99"]
    who = f"  {r['workload']} / {r['candidate']}:"
    figures = (f"{c90['mean']:.1f} ± {c90['std']:.1f} req/s at 90%, {c99['mean']:.1f} ± {c99['std']:.1f} at "
               f"99% ({r['cpu_s']:.0f} CPU s)")
    return f"{who} {figures}" if len(who) + 1 + len(figures) <= PROGRESS_WIDTH else f"{who}\n    {figures}"


def _spread(c: dict[str, Any]) -> str:
    # one word (no spaces), so a narrow column never breaks a figure from its spread
    return f"{'≥' if c['at_top'] else ''}{c['mean']:.1f}±{c['std']:.1f}"


def _ratio(x: float) -> str:
    return "-" if x != x else f"{x:.2f}"  # NaN: no reference, or no bound


CAPACITY_HEADERS = ("candidate", "@90%", "x90", "@99%", "x99", "bound", "binds", "90/bound", "99/bound",
                    "promoted", "dl-launch", "slack-cut", "stalled")


def capacity_tables(rows: list[dict[str, Any]], reference: str = "") -> list[Any]:
    """Per workload: capacity mean±std over seeds, the ratio to `reference` (x90, x99), the bound and the
    fraction of it reached, the late-chunk counts (the table `vox bench --plan sweep_policies` prints),
    then the best candidates at 90% and 99%. Figure tables: no figure cut at 80 columns."""
    from voxcli.tables import figure_table

    out: list[Any] = []
    for wl in dict.fromkeys(r["workload"] for r in rows):
        mine = [r for r in rows if r["workload"] == wl]
        ref = next((r for r in mine if r["candidate"] == reference), None)
        cells = []
        for r in mine:
            c90, c99 = r["cap90"], r["cap99"]
            x90 = c90["mean"] / ref["cap90"]["mean"] if ref and ref["cap90"]["mean"] else float("nan")
            x99 = c99["mean"] / ref["cap99"]["mean"] if ref and ref["cap99"]["mean"] else float("nan")
            b = r["bound"] or {"rps": float("nan"), "binding": "-"}
            f90, f99 = (c["mean"] / b["rps"] if b["rps"] else float("nan") for c in (c90, c99))
            cells.append([r["candidate"], _spread(c90), _ratio(x90), _spread(c99), _ratio(x99),
                          "-" if b["rps"] != b["rps"] else f"{b['rps']:.1f}", b["binding"],
                          _ratio(f90), _ratio(f99), str(r["promoted"]), str(r["deadline_launches"]),
                          str(r["slack_cuts"]), str(r["stalled"])])
        out.append(figure_table(f"{wl}: capacity req/s, mean±std over seeds", CAPACITY_HEADERS, cells,
                                left=("candidate", "binds")))
        ratio_to = ref["candidate"] if ref else "-"
        notes = [f"  x90, x99: ratio to {ratio_to}; ≥: some seed passed the top rate"]
        for q in ("cap90", "cap99"):
            top = max(r[q]["mean"] for r in mine)
            tied = [r["candidate"] for r in mine if r[q]["mean"] >= top - 1e-9]
            notes.append(f"  best at {q[3:]}%: {', '.join(tied)} ({top:.1f})")
        out.append("\n".join(notes))
    return out


RATE_HEADERS = ("workload", "candidate", "req/s", "SLO %", "stalled", "sent", "promoted", "dl-launch",
                "slack-cut", "rejected", "TTFA p50 ms")


def rate_table(rows: list[dict[str, Any]]) -> Any:
    """Every rate of every sweep, seeds pooled: SLO attainment, stalls, the late-chunk path's counts."""
    from voxcli.tables import figure_table

    cells = [[r["workload"], r["candidate"], f"{x['rate']:g}", f"{x['attainment'] * 100:.1f}",
              str(x["stalled"]), str(x["sent"]), str(x["promoted"]), str(x["deadline_launches"]),
              str(x["slack_cuts"]), str(x["rejected"]), f"{(x['ttfa_p50'] or 0) * 1e3:.0f}"]
             for r in rows for x in r["rates"]]
    return figure_table("every rate, seeds pooled", RATE_HEADERS, cells, left=("workload", "candidate"))


def overload_line(o: dict[str, Any]) -> str:
    """One finished overload offer, as it ends (the table at the end has every figure)."""
    return (f"  {o['workload']} / {o['candidate']} at {o['multiple']:g}x capacity ({o['rate']:.1f} req/s): "
            f"goodput {o['goodput']:.1f}, SLO {o['attainment'] * 100:.1f}%")


OVERLOAD_HEADERS = ("workload", "candidate", "x cap90", "req/s", "goodput", "/cap90", "SLO %", "done/s",
                    "rejected", "sent", "stalled", "TTFA p50 ms")


def overload_table(over: list[dict[str, Any]]) -> Any:
    from voxcli.tables import figure_table

    cells = [[o["workload"], o["candidate"], f"{o['multiple']:g}", f"{o['rate']:.1f}", f"{o['goodput']:.1f}",
              f"{o['goodput_over_capacity']:.2f}", f"{o['attainment'] * 100:.1f}",
              f"{o['completed_rps']:.1f}", str(o["rejected"]), str(o["sent"]), str(o["stalled"]),
              f"{(o['ttfa_p50'] or 0) * 1e3:.0f}"]
             for o in over]
    return figure_table("past capacity (goodput / 90% capacity)", OVERLOAD_HEADERS, cells,
                        left=("workload", "candidate"))
