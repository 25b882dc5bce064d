"""What binds capacity at one rate: where each request's time to first audio goes, and why the refused
ones were refused (an experiment plan's `report = "breakdown"`, e.g. voxcli/bench/plans/ttfa_breakdown.toml).

Contract: `ttfa_breakdown(config, utterances, rate, duration_s, seed, warmup)` plays one seed of Poisson
arrivals on the sim engine of `config` (after a `warmup` burst, as `vox bench` does) and returns, over
the requests that got audio, the p50/p90/p99 ms of: queue wait (arrival to prefill launch), prefill (to
the first frame), the first chunk's decode steps, its wait for a codec lane, its codec call, TTFA; the
decode rows per step (read at the executor's public `launch` seam); the gate's refusals by what bound
them; stalls, late chunks and the late-chunk counters. `breakdown_lines` prints it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from voxcli.bench.client import burst, record_from_timeline, schedule, synthesis_request
from voxcli.bench.metrics import stalled
from voxcli.bench.sweep import Variant
from voxcli.bench.targets import sim_target
from voxcli.bench.workloads import Utterance
from voxcli.config import EngineConfig
from voxcli.models.registry import sim_spec_for


def refusal_kind(reason: str) -> str:
    """The gate's refusal reason, reduced to what bound it."""
    if "codec is" in reason:
        return "codec behind its deadlines"
    m = re.search(r"waiting \d+ ms for free ([a-zA-Z /]+)", reason)
    if m:
        return "waiting for " + m.group(1).strip()
    return "predicted TTFA" if "predicted time" in reason else reason[:60]


def pct_ms(xs: Sequence[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] * 1e3 if xs else float("nan")


def ttfa_breakdown(config: EngineConfig, utterances: Sequence[Utterance], rate: float, duration_s: float,
                   seed: int = 0, warmup: int = 64) -> dict[str, Any]:
    frame_rate = sim_spec_for(config.model).frame_rate
    target = sim_target(config, Variant("breakdown"))
    try:
        target.play(burst(warmup, utterances, 0, frame_rate) if warmup else [], 900.0)  # builds the engine
        eng = target.engine
        rows: list[int] = []
        launch = eng.executor.launch

        def counted(work: Any) -> Any:  # every decode step's rows, as the executor is handed them
            if work.stage == "decode":
                rows.append(len(work.rows))
            return launch(work)

        eng.executor.launch = counted
        start = eng.now + 0.001
        streams = []
        for a in schedule(rate, duration_s, seed, utterances, frame_rate):
            s = eng.submit(synthesis_request(a, seed), at=start + a.at)
            s.drop_audio()
            streams.append(s)
        before = eng.load().late_chunks
        eng.run(until=None)
        counts = {k: v - before.get(k, 0) for k, v in eng.load().late_chunks.items()}
        chunk = config.chunk_or(eng.spec.chunk)
    finally:
        target.close()
    tls = [s.timeline for s in streams]
    refused = [tl for tl in tls if str(getattr(tl.status, "value", tl.status)) == "rejected"]
    served = [tl for tl in tls if tl.first_audio is not None]
    firsts = [min(tl.chunks, key=lambda c: c.index) for tl in served]
    parts = {
        "queue (arrival -> prefill)": [tl.admitted - tl.arrival for tl in served],
        "prefill (-> first frame)": [tl.first_frame - tl.admitted for tl in served],
        "first chunk decode steps": [c.t_ready - t.first_frame for t, c in zip(served, firsts, strict=True)],
        "wait for a codec lane": [c.t_dispatched - c.t_ready for c in firsts],
        "first chunk's codec call": [c.t_delivered - c.t_dispatched for c in firsts],
        "time to first audio": [tl.ttfa for tl in served],
    }
    srt = sorted(rows) or [0]
    return {
        "rate": rate, "duration_s": duration_s, "seed": seed, "split": f"{config.lm_sms}/{config.codec_sms}",
        "chunks": f"{chunk.first}/{list(chunk.ramp)}/{chunk.steady}", "admission": config.admission,
        "ttfa_target_ms": config.ttfa_target_s * 1e3, "sent": len(tls), "refused": len(refused),
        "over_ttfa": sum(tl.ttfa > config.ttfa_target_s for tl in served),
        "parts_ms": {k: {"p50": pct_ms(v, .5), "p90": pct_ms(v, .9), "p99": pct_ms(v, .99)}
                     for k, v in parts.items()},
        "decode_rows": {"p10": srt[len(srt) // 10], "p50": srt[len(srt) // 2],
                        "p90": srt[9 * len(srt) // 10], "max": srt[-1]},
        "refusals": dict(Counter(refusal_kind(tl.reason or "") for tl in refused).most_common()),
        "stalled": sum(stalled(record_from_timeline(tl, start)) for tl in served),
        "late_chunks": sum(c.deadline is not None and c.t_delivered > c.deadline
                           for tl in served for c in tl.chunks),
        "counts": counts,
    }


def breakdown_lines(label: str, b: dict[str, Any]) -> list[str]:
    # a heading of three short lines, not one of 150 columns: an 80-column terminal shows it unwrapped
    out = [f"{label} at {b['rate']:g} req/s, {b['duration_s']:g} s, seed {b['seed']}",
           f"  split {b['split']}, chunks {b['chunks']}, admission {b['admission']}",
           f"  sent {b['sent']}, refused {b['refused']}, "
           f"TTFA > {b['ttfa_target_ms']:.0f} ms {b['over_ttfa']}"]
    for name, p in b["parts_ms"].items():
        out.append(f"  {name:28s} p50 {p['p50']:6.1f}  p90 {p['p90']:6.1f}  p99 {p['p99']:6.1f} ms")
    d = b["decode_rows"]
    out.append(f"  decode rows per step: p10 {d['p10']}  p50 {d['p50']}  p90 {d['p90']}  max {d['max']}")
    out += [f"  refused {n:5d}: {kind}" for kind, n in b["refusals"].items()]
    out.append(f"  stalled (>= 10 ms) {b['stalled']}, late chunks {b['late_chunks']}")
    out.append(f"  counters {b['counts']}")
    return out
