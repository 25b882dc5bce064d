"""Disaggregated placements on Ray Serve, measured against `vox profile --gpus N`'s prediction, one run.

    nice -n 10 python scripts/bench_placements.py --gpus 2 --set max_running=4 --duration 8
    nice -n 10 python scripts/bench_placements.py --gpus 2,4 --model cosyvoice3-0.5b --set max_running=4

Every replica runs the REAL-TIME SIM executor (a simulated GPU on the wall clock: the only way to run a
placement of GPUs on a CPU machine), one Ray Serve app per replica as `vox serve --placement` deploys
them (voxcli/server/ray_roles.py). The driver is the front door (`PlacementEngine`, what `vox batch
--placement` uses; no HTTP, so the host's CPUs go to the replicas) and plays the bench's open-loop
arrivals (`EngineTarget`, the in-process client of `vox bench`). Each placement's rates are its predicted
capacity times --fractions, so every capacity (90% of requests meeting TTFA <= 200 ms and no stall) is
measured to the grid's resolution around the prediction it is checked against.

The prediction is `voxcli.placement.ranked_placements`: `vox profile --gpus N --no-simulate`'s throughput
model, given the same decode-row cap as the engines (`--set max_running=M` -> LoadShape.max_decode_batch=M),
so predicted and measured describe the same engines. Cap the rows on a small host: the simulated GPUs are
fast, the host's CPUs (Ray, the engines' host loops, the client) are what this machine lacks. Also printed
per split placement: Ray messages and code bytes per chunk (the LM replicas' count), the LM -> codec hop
(chunk handed off by the LM engine -> acknowledged by the codec replica), the latency the hop adds to TTFA,
and the host CPU each role's replica processes spend per chunk (engine host loop + Ray messaging).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from voxcli.bench.client import EngineTarget
from voxcli.bench.sweep import SweepSpec, Variant, sweep_variant
from voxcli.bench.workloads import load_workload
from voxcli.placement import Placement, ranked_placements
from voxcli.server.ray_app import ReplicaSpec


def _placements(model: str, gpu: str, gpus: int, cap: int | None, top: int) -> list[tuple[Placement, float]]:
    """The runnable placements (LM-only with codec-only) of `gpus` GPUs, best predicted first, N x both
    always among them."""
    out = []
    for p in ranked_placements(model, gpu, gpus, max_decode_batch=cap):
        placement = Placement(p.both, p.lm_only, p.codec_only)
        if p.rps > 0 and (p.lm_only > 0) == (p.codec_only > 0):
            out.append((placement, p.rps))
    both = [x for x in out if x[0].both == gpus]
    return (both + [x for x in out if x[0].both != gpus])[:top]


def _cpu(front) -> dict[str, float]:  # noqa: ANN001
    """Host CPU seconds each LM/codec replica process has used so far (its own report)."""
    front._poll_once()
    return {b.name: (b.stats or {}).get("cpu_s", 0.0)
            for role in ("lm", "codec") for b in front.backends[role]}


def inprocess_cost(model: str, gpu: str, sets: list[str], requests: int, frames: int) -> None:
    """Host CPU per chunk of an LM-only engine feeding a codec-only engine in ONE process, no Ray (the
    relay is a function call): the engines' own share of what a split costs the host, beside a both engine
    on the same requests."""
    import threading

    from voxcli.models.base import SynthesisRequest

    from voxcli.engine.roles import lm_items, relay
    from voxcli.server.sessions import sim_session

    sets = [*sets, "admission=deadline"]  # every request is served (a cost, not an SLO)
    reqs = [SynthesisRequest(text=f"r{i}", fixed_frames=frames) for i in range(requests)]
    both = sim_session(model, gpu, sets).engine
    t0 = time.process_time()
    for st in [both.submit(r) for r in reqs]:
        st.wait(300)
    both_cpu = time.process_time() - t0
    chunks = sum(len(tl.chunks) for tl in both.timelines)
    both.close()
    lm = sim_session(model, gpu, sets, role="lm").engine
    codec = sim_session(model, gpu, sets, role="codec").engine
    t0 = time.process_time()
    outs, threads = [], []
    for i, r in enumerate(reqs):
        outs.append(codec.attach(f"k{i}"))
        lm_stream = lm.submit(r, key=f"k{i}")
        t = threading.Thread(target=relay, args=(lm_items(lm_stream), codec, lm_stream.cancel))
        t.start()
        threads.append(t)
    for out in outs:
        out.wait(300)
    split_cpu = time.process_time() - t0
    lm.close()
    codec.close()
    print(f"in-process, {requests} requests x {frames} frames = {chunks} chunks: both engine "
          f"{1e3 * both_cpu / chunks:.2f} ms host CPU per chunk, LM-only + codec-only engines with the local "
          f"relay {1e3 * split_cpu / chunks:.2f} ms per chunk")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="2", help="GPU counts (comma-separated)")
    ap.add_argument("--model", default="qwen3-tts-1.7b")
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--fractions", default="0.5,0.7,0.85,1.0,1.15",
                    help="offered rates as fractions of each placement's predicted capacity")
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--top", type=int, default=3, help="placements per GPU count (N x both first)")
    ap.add_argument("--only", default="", help="run only these placements (e.g. 'lm=3,codec=1;both=4')")
    ap.add_argument("--workload", default="libritts")
    ap.add_argument("--out", type=Path, default=Path("out/bench/placements.json"))
    ap.add_argument("--inprocess-cost", type=int, default=0, metavar="REQUESTS",
                    help="only measure the engines' host CPU per chunk in one process (no Ray)")
    args = ap.parse_args()
    if args.inprocess_cost:
        inprocess_cost(args.model, args.gpu, args.sets, args.inprocess_cost, frames=100)
        return

    import ray
    from ray import serve

    from voxcli.server.ray_front import PlacementEngine
    from voxcli.server.ray_roles import deploy_replicas, describe_first

    cap = next((int(s.split("=", 1)[1]) for s in args.sets if s.startswith("max_running=")), None)
    utts = load_workload(args.workload)
    fractions = [float(x) for x in args.fractions.split(",")]
    ray.init(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    serve.start(proxy_location="Disabled")
    spec = ReplicaSpec(model=args.model, executor="sim", gpu=args.gpu, sets=args.sets)
    rows = []
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start", flush=True)
    try:
        for gpus in [int(x) for x in args.gpus.split(",")]:
            runs = _placements(args.model, args.gpu, gpus, cap, 99 if args.only else args.top)
            if args.only:
                runs = [r for r in runs if r[0].describe() in args.only.split(";")]
            for k, (placement, predicted) in enumerate(runs):
                t0 = time.perf_counter()
                names = deploy_replicas(spec, placement, prefix=f"b{gpus}-{k}")
                model_spec, _, _ = describe_first(names)
                front = PlacementEngine(names, model_spec.sample_rate, model_spec.frame_seconds)
                print(f"{placement.describe()} up in {time.perf_counter() - t0:.1f} s; predicted "
                      f"{predicted:.1f} req/s", flush=True)
                sweep = SweepSpec(rates=[round(predicted * f, 2) for f in fractions],
                                  duration_s=args.duration, warmup=args.warmup, seeds=1, timeout_s=120,
                                  stop_rule=False,
                                  frame_rate=model_spec.frame_rate)
                target = EngineTarget(front, placement.describe(), seed=0)
                load0 = os.getloadavg()[0]

                def progress(sw, r):  # noqa: ANN001 - the sweep's callback
                    print(f"  {r.rate:g} req/s -> {r.attainment * 100:5.1f}% SLO, TTFA p50 "
                          f"{(r.ttfa_p50 or 0) * 1e3:.0f} ms, {r.rejected} rejected", flush=True)

                cpu0 = _cpu(front)
                res = sweep_variant(target, Variant(placement.describe()), sweep, utts, progress)
                cpu = {k: v - cpu0.get(k, 0.0) for k, v in _cpu(front).items()}
                relay = front.relay().per_chunk()
                if relay["chunks"]:  # host CPU per chunk of each split role: what a starved host runs out of
                    for role in ("lm", "codec"):
                        spent = sum(v for k, v in cpu.items() if f"-{role}-" in k)
                        relay[f"{role}_cpu_ms_per_chunk"] = 1e3 * spent / relay["chunks"]
                row = {"gpus": gpus, "placement": placement.describe(), "predicted_rps": round(predicted, 2),
                       "capacity90": res.capacity90,
                       "ratio": round(res.capacity90 / predicted, 3) if predicted else None,
                       "ttfa_p50_ms_lowest_rate": round((res.results[0].ttfa_p50 or 0) * 1e3, 1),
                       "load_avg": round((load0 + os.getloadavg()[0]) / 2, 1), "relay": relay,
                       "sweep": res.to_dict()}
                rows.append(row)
                print(f"  capacity@90% {res.capacity90:g} req/s vs predicted {predicted:.1f} "
                      f"({row['ratio']}x); relay {json.dumps({k: round(v, 2) for k, v in relay.items()})}",
                      flush=True)
                front.close()
                for ns in names.values():
                    for n in ns:
                        serve.delete(n)
    finally:
        serve.shutdown()
        ray.shutdown()
    print("\n| GPUs | placement | predicted req/s | measured capacity@90% | measured/predicted | TTFA p50 "
          "(lowest rate) | msgs/chunk | code B/chunk | LM->codec hop p50/p90 ms | load avg |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        rl = r["relay"]
        split = rl["chunks"] > 0
        hop = f"{rl['hop_ms_p50']:.1f}/{rl['hop_ms_p90']:.1f}" if split else "-"
        print(f"| {r['gpus']} | {r['placement']} | {r['predicted_rps']} | {r['capacity90']:g} | "
              f"{r['ratio']} | {r['ttfa_p50_ms_lowest_rate']} ms | {rl['messages_per_chunk']:.0f} | "
              f"{rl['code_bytes_per_chunk']:.0f} | {hop} | {r['load_avg']} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": {**vars(args), "out": str(args.out)}, "rows": rows}, indent=1))
    print(f"JSON: {args.out}")


if __name__ == "__main__":
    main()
