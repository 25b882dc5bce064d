"""Sweep output: a rich table in the terminal, JSON for machines, PNG plots (matplotlib, imported only
when a plot is written): attainment and p99 TTFA vs offered rate, one line per policy variant."""

from __future__ import annotations

import json
from pathlib import Path

from voxcli.bench.sweep import SweepResult


def table_console():
    """A rich console for the tables: a terminal keeps its width; anything else (a log file, a pipe) gets
    $COLUMNS when set, else room enough for every table on one line each. The tables themselves
    (voxcli/tables.py) never cut a figure at 80 columns."""
    import os
    import sys

    from rich.console import Console

    if sys.stdout.isatty():
        return Console()
    columns = os.environ.get("COLUMNS", "")
    return Console(width=int(columns) if columns.isdigit() and int(columns) >= 40 else 400, soft_wrap=False)


def model_slug(model: str) -> str:
    """A model's name for output files: a recipe name as is, a hub id or checkpoint folder by its last
    component (`Qwen/Qwen3-TTS-12Hz-0.6B-Base` -> `Qwen3-TTS-12Hz-0.6B-Base`), safe for a file name."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "-", Path(model.rstrip("/")).name) or "model"


def bench_stem(model: str, executor: str, gpu: str, url: bool = False) -> str:
    """`bench-<model>-<executor>[-<gpu>]`: a Dia bench never overwrites a Qwen bench's files."""
    return f"bench-{'url-' if url else ''}{model_slug(model)}-{executor}{'-' + gpu if gpu else ''}"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.0f}"


RATE_HEADERS = ("req/s", "sent", "SLO %", "goodput", "done/s", "TTFA p50", "p90", "p99 (ms)", "stalled",
                "rejected", "failed", "audio<1s %")
LATE_HEADERS = ("req/s", "stalled", "promoted chunks", "deadline launches", "slack cuts")


def rate_tables(result: SweepResult) -> list:
    from voxcli.tables import figure_table

    return [figure_table(f"{sw.variant.label}: per offered rate", RATE_HEADERS,
                         [[f"{r.rate:g}", str(r.sent), f"{r.attainment * 100:.1f}", f"{r.goodput:.1f}",
                           f"{r.completed_rps:.1f}", _ms(r.ttfa_p50), _ms(r.ttfa_p90), _ms(r.ttfa_p99),
                           str(r.stalled), str(r.rejected), str(r.failed), f"{r.audio_within_1s * 100:.0f}"]
                          for r in sw.results])
            for sw in result.sweeps]


def late_chunk_tables(result: SweepResult) -> list:
    """Per variant with any late-chunk decision (sim targets count them): stalls, later chunks the urgent
    lane took (promoted), background batches launched below B by their deadline and background batches cut
    by their chunks' slack (config slack_cap)."""
    from voxcli.tables import figure_table

    return [figure_table(f"{sw.variant.label}: the late-chunk path per offered rate", LATE_HEADERS,
                         [[f"{r.rate:g}", str(r.stalled), str(r.promoted), str(r.deadline_launches),
                           str(r.slack_cuts)] for r in sw.results])
            for sw in result.sweeps if any(r.promoted or r.deadline_launches or r.slack_cuts
                                           for r in sw.results)]


AUDIO_IN_HEADERS = ("req/s", "sent", "done", "TTFT p50", "p99 (ms)", "tokens/s p50")


def audio_in_tables(result: SweepResult) -> list:
    """Per variant with audio-in requests (a mixed workload, bench/audio_in.py): their count, time to first
    token p50/p99 and tokens per second p50 at each offered rate (req/s counts every arrival; the TTS table
    beside it counts TTS requests only)."""
    from voxcli.tables import figure_table

    return [figure_table(f"{sw.variant.label}: audio-in (text out) requests per offered rate",
                         AUDIO_IN_HEADERS,
                         [[f"{r.rate:g}", str(r.audio_in_sent), str(r.audio_in_done), _ms(r.ttft_p50),
                           _ms(r.ttft_p99), _per_s(r.tokens_per_s_p50)]
                          for r in sw.results])
            for sw in result.sweeps if any(r.audio_in_sent for r in sw.results)]


def _per_s(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def capacity_table(result: SweepResult):
    from voxcli.tables import figure_table

    rows = []
    for sw in result.sweeps:
        peak = max((r.goodput for r in sw.results), default=0.0)
        rows.append([sw.variant.label, capacity_cell(sw, 0.90), capacity_cell(sw, 0.99), f"{peak:.1f}",
                     "-" if sw.stopped_after is None else f"{sw.stopped_after:g}", f"{sw.wall_s:.1f}"])
    headers = ("policy", "capacity @90%", "capacity @99%", "peak goodput", "stopped after", "wall s")
    ttfa = result.spec.ttfa_target_s * 1000
    return figure_table(f"SLO capacity (TTFA <= {ttfa:.0f} ms, no stall >= 10 ms)", headers, rows,
                        left=("policy",))


def bound_table(result: SweepResult):
    """Each variant's capacity as a fraction of the cost profile's own bound (voxcli/sim/bound.py; sim runs),
    or None when no variant has one."""
    from voxcli.tables import figure_table

    bounds = result.meta.get("bounds", {})  # label -> CapacityBound dict (voxcli/sim/config_bound.py)
    rows = [[sw.variant.label, f"{b['rps']:.1f}", b["binding"], f"{b['lm_rps']:.1f}/{b['codec_rps']:.1f}",
             f"{_cap_ms(b.get('step_cap_s'))}/{_cap_ms(b.get('schedule_cap_s'))}", _ceilings(b),
             bound_cell(sw, 0.90, b), bound_cell(sw, 0.99, b)]
            for sw in result.sweeps if (b := bounds.get(sw.variant.label)) is not None]
    if not rows:
        return None
    return figure_table("capacity / bound at 90% and 99% (the cost profile's own bound, voxcli/sim/bound.py; "
                        "LM / codec: each lane's bound; step cap ms: the decode step the SLO allows, in the "
                        "bound / the one the chunk schedule allows, not in it; ceiling: Poisson occupancy's "
                        "at 90% / 99%)",
                        ("policy", "bound", "binds", "LM/codec", "step cap", "ceiling", "@90%", "@99%"),
                        rows, left=("policy", "binds"))


def _ceilings(b: dict) -> str:
    from voxcli.sim.bound import CapacityBound

    known = {k: v for k, v in b.items() if k in CapacityBound.__dataclass_fields__}
    bound = CapacityBound(**known)
    return f"{bound.ceiling(0.90):.2f}/{bound.ceiling(0.99):.2f}"


def _cap_ms(seconds: float | None) -> str:
    """A step cap in ms to 0.1 ms (caps are a few ms; an unbounded one prints '-')."""
    return "-" if seconds is None or seconds == float("inf") else f"{seconds * 1e3:.1f}"


def bound_cell(sw, threshold: float, bound: dict | None) -> str:
    """The mean capacity over the seeds as a fraction of the device's bound ("≥" when it is a lower
    bound: some seed passed the highest rate tested)."""
    if bound is None or bound["rps"] <= 0:
        return "-"
    st = sw.capacity_stats(threshold)
    return f"{'≥' if st['at_top'] else ''}{st['mean'] / bound['rps']:.2f}"


def capacity_cell(sw, threshold: float) -> str:
    """Mean ± standard deviation over the seeds, with the range (one seed: just the capacity). A capacity
    at the top of the tested range is a lower bound: "≥40", never "40.0 ± 0.0"."""
    st = sw.capacity_stats(threshold)
    ge = "≥" if st["at_top"] else ""  # no space: a narrow table must not wrap the sign off its figure
    if st["n"] < 2:
        return f"{ge}{st['mean']:g}"
    if st["at_top"] == st["n"]:  # every seed passed the highest rate
        return f"≥{st['max']:g} ({st['n']} seeds)"
    top = f"≥{st['max']:g}" if st["at_top"] else f"{st['max']:g}"
    return f"{ge}{st['mean']:.1f} ± {st['std']:.1f} ({st['min']:g}–{top}, {st['n']} seeds)"


def write_json(result: SweepResult, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result.to_dict(), indent=1))
    return path


def plot(result: SweepResult, path: Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(14, 4))
    for sw in result.sweeps:
        rates = [r.rate for r in sw.results]
        ax1.plot(rates, [r.attainment * 100 for r in sw.results], marker="o", ms=3, label=sw.variant.label)
        ax2.plot(
            rates,
            [(r.ttfa_p99 or float("nan")) * 1e3 for r in sw.results],
            marker="o",
            ms=3,
            label=sw.variant.label,
        )
        ax3.plot(rates, [r.goodput for r in sw.results], marker="o", ms=3, label=sw.variant.label)
    ax1.axhline(90, color="gray", ls="--", lw=0.8)
    ax1.axhline(99, color="gray", ls=":", lw=0.8)
    ax1.set(xlabel="offered load (req/s)", ylabel="SLO attainment (%)", ylim=(0, 101))
    ax2.axhline(200, color="gray", ls="--", lw=0.8)
    ax2.set(xlabel="offered load (req/s)", ylabel="p99 TTFA (ms)", yscale="log")
    ax3.set(xlabel="offered load (req/s)", ylabel="goodput (req/s)")
    for ax in (ax1, ax2, ax3):
        ax.grid(alpha=0.3)
    ax1.legend(fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
