"""What binds capacity at one rate: where each request's time to first audio goes, and why the refused
ones were refused (issue 17 part 2).

    nice -n 10 .venv/bin/python scripts/ttfa_breakdown.py --workload libritts --rate 69 \
        --set lm_sms=88 --set codec_sms=40 --set chunk.first=10

One seed, `--duration` s of Poisson arrivals on the honest sim (after vox bench's 64-request warm-up),
the shipped recipe with `--set` on top. Prints, over the requests that got audio, p50/p90/p99 of: queue
wait (arrival to prefill launch), prefill (to the first frame), the first chunk's decode steps, its wait
for a codec lane and its codec call; the decode batch sizes; the gate's refusals by what bound them
(predicted TTFA, waiting for codec slots or decode rows / KV pages, the codec behind its deadlines);
stalls and late chunks; the late-chunk counters.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter

from voxcli.bench.client import _request, burst, record_from_timeline, schedule
from voxcli.bench.metrics import stalled
from voxcli.bench.sweep import Variant
from voxcli.bench.targets import model_config, sim_target
from voxcli.bench.workloads import load_workload


def refusal_kind(reason: str) -> str:
    if "codec is" in reason:
        return "codec behind its deadlines"
    m = re.search(r"waiting \d+ ms for free ([a-zA-Z /]+)", reason)
    if m:
        return "waiting for " + m.group(1).strip()
    return "predicted TTFA" if "predicted time" in reason else reason[:60]


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] * 1e3 if xs else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen3-tts-1.7b")
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--workload", default="libritts")
    ap.add_argument("--rate", type=float, required=True)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", action="append", default=[])
    args = ap.parse_args()
    cfg = model_config(args.model, "sim", args.gpu, ["sim_model=honest", *args.set])
    target = sim_target(cfg, Variant("x"))
    utts = load_workload(args.workload)
    target.play(burst(64, utts, 0), 900.0)
    eng = target.engine
    sched = eng.scheduler
    rows: list[int] = []
    launch = sched._launch_decode

    def counted(now: float):  # type: ignore[no-untyped-def]
        work = launch(now)
        rows.append(len(work.rows))
        return work

    sched._launch_decode = counted
    start = eng.now + 0.001
    streams = []
    for a in schedule(args.rate, args.duration, args.seed, utts):
        s = eng.submit(_request(a, args.seed), at=start + a.at)
        s.drop_audio()
        streams.append(s)
    before = dict(sched.counts)
    eng.run(until=None)
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
    chunk = cfg.chunk_or(eng.spec.chunk)
    print(f"{args.workload} at {args.rate:g} req/s, {args.duration:g} s, seed {args.seed}, "
          f"{cfg.lm_sms}/{cfg.codec_sms}, chunks {chunk.first}/{list(chunk.ramp)}/{chunk.steady}, "
          f"admission {cfg.admission}: sent {len(tls)}, refused {len(refused)}, "
          f"TTFA > {cfg.ttfa_target_s * 1e3:.0f} ms {sum(tl.ttfa > cfg.ttfa_target_s for tl in served)}")
    for name, xs in parts.items():
        print(f"  {name:28s} p50 {pct(xs, .5):6.1f}  p90 {pct(xs, .9):6.1f}  p99 {pct(xs, .99):6.1f} ms")
    srt = sorted(rows)
    print(f"  decode rows per step: p10 {srt[len(srt) // 10]}  p50 {srt[len(srt) // 2]}  "
          f"p90 {srt[9 * len(srt) // 10]}  max {srt[-1]}")
    for kind, n in Counter(refusal_kind(tl.reason or "") for tl in refused).most_common():
        print(f"  refused {n:5d}: {kind}")
    n_stalled = sum(stalled(record_from_timeline(tl, start)) for tl in served)
    late = sum(c.deadline is not None and c.t_delivered > c.deadline for tl in served for c in tl.chunks)
    print(f"  stalled (>= 10 ms) {n_stalled}, late chunks {late}, "
          f"counters {({k: v - before.get(k, 0) for k, v in sched.counts.items()})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
