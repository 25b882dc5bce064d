"""Scale-out on Ray Serve, measured: capacity of 1 vs 2 sim replicas behind the same HTTP API, one run.

    python -m benchmarks bench_replicas --rates 4,8,12,16,20 --duration 15 --set max_running=8
    python -m benchmarks bench_replicas --per-replica --rates 6,7,8,9,10,11 --duration 15 --set max_running=8

Each configuration is deployed on a local Ray instance (`voxcli.cluster.ray_app.start`, the code
`vox serve --replicas N` runs), driven over HTTP by the bench's open-loop client (`HttpTarget`, the one
`vox bench --url` uses), then shut down before the next. Replicas run the real-time simulated GPU
(`--gpu`, default h100). On a small host, cap each replica (`--set max_running=8`) so the device, not the
host's CPUs running the proxy, the replicas and the client, is what saturates; say so with the numbers.
Prints the capacity (90% SLO attainment) of each and the ratio.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

from voxcli.bench.http_target import HttpTarget
from voxcli.bench.sweep import SweepSpec, Variant, parse_rates, sweep_variant
from voxcli.bench.workloads import load_workload
from voxcli.cluster.ray_app import ReplicaSpec, start
from voxcli.server.service import Limits


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--replicas", default="1,2", help="replica counts to compare")
    ap.add_argument("--rates", default="4,8,12,16,20")
    ap.add_argument("--per-replica", action="store_true",
                    help="--rates are per replica: N replicas are offered N times each rate (same grid)")
    ap.add_argument("--duration", type=float, default=15.0)
    ap.add_argument("--warmup", type=int, default=8)
    ap.add_argument("--seeds", type=int, default=1, help="arrival seeds pooled per rate")
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--model", default="qwen3-tts-1.7b")
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--port", type=int, default=8790)
    ap.add_argument("--workload", default="libritts")
    ap.add_argument("--out", type=Path, default=Path("out/bench/replicas.json"))
    args = ap.parse_args()

    from ray import serve

    utts = load_workload(args.workload)
    sweep = SweepSpec(rates=parse_rates(args.rates), duration_s=args.duration, warmup=args.warmup,
                      seeds=args.seeds, timeout_s=120, stop_rule=False)
    spec = ReplicaSpec(model=args.model, executor="sim", gpu=args.gpu, sets=args.sets,
                       limits=asdict(Limits()))
    results = {}
    for n in [int(x) for x in args.replicas.split(",")]:
        t0 = time.perf_counter()
        start(spec, n, "127.0.0.1", args.port, quiet=True)
        print(f"{n} replica(s) up in {time.perf_counter() - t0:.1f} s", flush=True)
        target = HttpTarget(f"http://127.0.0.1:{args.port}", f"{n}x", seed=0)
        scaled = SweepSpec(**{**vars(sweep), "rates": [r * n for r in sweep.rates]}) if args.per_replica \
            else sweep
        try:
            res = sweep_variant(target, Variant(f"{n} replica(s)"), scaled, utts,
                                lambda sw, r: print(f"  {sw.variant.label}: {r.rate:g} req/s -> "
                                                    f"{r.attainment * 100:5.1f}% SLO, TTFA p50 "
                                                    f"{(r.ttfa_p50 or 0) * 1e3:.0f} ms, "
                                                    f"{r.rejected} rejected", flush=True))
        finally:
            target.close()
            serve.shutdown()
        results[n] = res
        print(f"{n} replica(s): capacity@90% {res.capacity90:g} req/s, @99% {res.capacity99:g} req/s",
              flush=True)
    counts = sorted(results)
    if len(counts) >= 2 and results[counts[0]].capacity90 > 0:
        ratio = results[counts[-1]].capacity90 / results[counts[0]].capacity90
        print(f"capacity ratio {counts[-1]} vs {counts[0]} replica(s) at 90% SLO: {ratio:.2f}x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": vars(args) | {"out": str(args.out)},
                                    "sweeps": {n: r.to_dict() for n, r in results.items()}}, indent=1))
    print(f"JSON: {args.out}")


if __name__ == "__main__":
    main()
