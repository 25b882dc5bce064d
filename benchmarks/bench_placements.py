"""Disaggregated placements on Ray Serve, measured against `vox profile --gpus N`'s prediction, one run.

    nice -n 10 python -m benchmarks bench_placements --gpus 2 --set max_running=4 --duration 8 --seeds 1
    python -m benchmarks bench_placements --gpus 2,4 --top 2 --set max_running=4 --duration 60 --seeds 2

Every replica runs the REAL-TIME SIM executor (a simulated GPU on the wall clock: the only way to run a
placement of GPUs on a CPU machine), one Ray Serve app per replica as `vox serve --placement` deploys
them (voxcli/cluster/ray_roles.py). The driver is the front door (`PlacementEngine`, what `vox batch
--placement` uses; no HTTP, so the host's CPUs go to the replicas) and plays the bench's open-loop
arrivals (`EngineTarget`, the in-process client of `vox bench`). Each placement's rates are its predicted
capacity times --fractions, so every capacity (90% of requests meeting TTFA <= 200 ms and no stall) is
measured to the grid's resolution around the prediction it is checked against.

The prediction is `vox profile --gpus N`'s (voxcli/sim/profile_placements.py): the throughput model
ranks the placements (`voxcli.sim.placement_rank.ranked_placements`, given the engines' decode-row cap: `--set
max_running=M` -> LoadShape.max_decode_batch=M), and each is co-simulated on the virtual clock for its SLO
capacity (voxcli/sim/placement.py), with the replicas' own config, under its optimistic and
pessimistic network; the rates run here are fractions of the optimistic one, with `--seeds` arrival seeds
each. Cap the rows on a small host: the simulated GPUs are fast, the host's CPUs (Ray, the engines' host
loops, the client) are what this machine lacks. Also printed per split placement: Ray messages and code
bytes per chunk (the LM replicas' count), the LM -> codec hop (chunk handed off by the LM engine ->
acknowledged by the codec replica), the latency the hop adds to TTFA, and the host CPU each role's
replica processes spend per chunk (engine host loop + Ray messaging).
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
from voxcli.cluster.ray_app import ReplicaSpec
from voxcli.placement import Placement
from voxcli.sim.placement import PlacementPrediction
from voxcli.sim.placement_rank import ranked_placements
from voxcli.sim.profile_placements import candidates, predict_placements


def _placements(model: str, gpu: str, gpus: int, cap: int | None, top: int) -> list[tuple[Placement, float]]:
    """The runnable placements (LM-only with codec-only) of `gpus` GPUs, best by throughput bound first,
    N x both always among them (what `vox profile --gpus N` simulates)."""
    return candidates(ranked_placements(model, gpu, gpus, max_decode_batch=cap), gpus, top)


def predict(config, placement: Placement, bound: float, utts, duration: float, seeds: int,  # noqa: ANN001
            frame_rate: float) -> dict[str, PlacementPrediction]:
    """`vox profile --gpus N`'s SLO capacity of `placement` (both network settings), for `config`."""
    return predict_placements(config, [(placement, bound)], utts, duration, seeds, frame_rate)[0][2]


def _cpu(front) -> dict[str, float]:  # noqa: ANN001
    """Host CPU seconds each LM/codec replica process has used so far (its own report)."""
    front._poll_once()
    return {b.name: (b.stats or {}).get("cpu_s", 0.0)
            for role in ("lm", "codec") for b in front.backends[role]}


def _thread_cpu(engine) -> float:  # noqa: ANN001
    """CPU seconds of an engine's host thread so far (the real-time sim runs on it: the engine's cost)."""
    return time.clock_gettime(time.pthread_getcpuclockid(engine._thread.ident))


def inprocess_cost(model: str, gpu: str, sets: list[str], requests: int, frames: int) -> dict[str, float]:
    """Host CPU per chunk of a both engine, and of an LM-only engine feeding a codec-only engine in ONE
    process, no Ray (the relay is a function call on a thread per request), per role: each engine's
    host thread's own CPU clock, the relay threads the rest of the process's CPU."""
    import threading

    from voxcli.models.base import SynthesisRequest

    from voxcli.engine.roles import lm_items, relay
    from voxcli.session import sim_session

    sets = [*sets, "admission=deadline"]  # every request is served (a cost, not an SLO)
    reqs = [SynthesisRequest(text=f"r{i}", fixed_frames=frames) for i in range(requests)]
    both = sim_session(model, gpu, sets).engine
    t0, b0 = time.process_time(), _thread_cpu(both)
    for st in [both.submit(r) for r in reqs]:
        st.wait(300)
    both_cpu, both_loop = time.process_time() - t0, _thread_cpu(both) - b0
    chunks = sum(len(tl.chunks) for tl in both.timelines)
    both.close()
    lm = sim_session(model, gpu, sets, role="lm").engine
    codec = sim_session(model, gpu, sets, role="codec").engine
    t0, l0, c0 = time.process_time(), _thread_cpu(lm), _thread_cpu(codec)
    outs, threads = [], []
    for i, r in enumerate(reqs):
        outs.append(codec.attach(f"k{i}"))
        lm_stream = lm.submit(r, key=f"k{i}")
        t = threading.Thread(target=relay, args=(lm_items(lm_stream), codec, lm_stream.cancel))
        t.start()
        threads.append(t)
    for out in outs:
        out.wait(300)
    split_cpu, lm_loop, codec_loop = time.process_time() - t0, _thread_cpu(lm) - l0, _thread_cpu(codec) - c0
    lm.close()
    codec.close()
    ms = {"both": 1e3 * both_cpu / chunks, "both_loop": 1e3 * both_loop / chunks,
          "split": 1e3 * split_cpu / chunks, "lm_loop": 1e3 * lm_loop / chunks,
          "codec_loop": 1e3 * codec_loop / chunks,
          "relay": 1e3 * (split_cpu - lm_loop - codec_loop) / chunks}
    print(f"in-process, {requests} requests x {frames} frames = {chunks} chunks, host CPU per chunk: both "
          f"engine {ms['both']:.2f} ms (its host loop {ms['both_loop']:.2f}); LM-only + codec-only with the "
          f"local relay {ms['split']:.2f} ms (LM loop {ms['lm_loop']:.2f}, codec loop "
          f"{ms['codec_loop']:.2f}, relay threads {ms['relay']:.2f})", flush=True)
    return ms


def host_budget(model: str, gpu: str, gpus: list[int], cap: int | None, top: int, workload: str,
                ms: dict[str, float], ray_split_ms: float | None, ray_msgs: float,
                measured: dict[str, dict] | None) -> None:
    """Which bound binds on THIS host: per placement, the GPU prediction beside the host capacity, i.e.
    the host's cores divided by the host CPU one request costs (its chunks x the CPU per chunk), and, for
    a measured capacity (an earlier run's JSON), the host cores it used (capacity x CPU per request): a
    shared host gives a run what the other processes leave, which the load average only hints at.

    Assumptions (stated, not fitted): every replica of a placement shares this one host, so the host
    capacity does not grow with the GPU count (its cores, idle: the optimistic bound); a placement with
    both and LM replicas serves b / (b + lm) of its requests on both replicas (the front door routes by
    slack; both have the LM's decode capacity). CPU per chunk under Ray: a split's is
    `ray_split_ms` (the replicas' own CPU per chunk measured under Ray Serve, `ray_msgs` messages per
    chunk); Ray's cost per message is taken as what that adds to the in-process split, divided by its
    messages, and a both replica's chunk costs the in-process both engine plus one message (its PCM to the
    front door). Without `ray_split_ms` the in-process costs alone (optimistic). The front door and the
    bench client are not counted: every host figure is an upper bound."""
    from voxcli.models.registry import sim_spec_for

    from voxcli.bench.workloads import load_workload, mean_chunks

    cores = len(os.sched_getaffinity(0))
    sim = sim_spec_for(model)
    per_req = mean_chunks(load_workload(workload), sim.chunk.first, sim.chunk.steady, sim.frame_rate)
    split_ms, both_ms = ms["split"], ms["both"]
    if ray_split_ms is not None:
        per_msg = max(0.0, ray_split_ms - ms["split"]) / ray_msgs
        split_ms, both_ms = ray_split_ms, ms["both"] + per_msg
        print(f"under Ray: split {split_ms:.2f} ms per chunk (--ray-split-ms), Ray {per_msg:.2f} ms per "
              f"message (derived), both {both_ms:.2f} ms per chunk (in-process + one message)")
    now = os.getloadavg()[0]
    print(f"host: {cores} cores, load average {now:.1f} now; {per_req:.2f} chunks per {workload} request")
    print(f"| GPUs | placement | GPU throughput bound req/s | host CPU ms/request | host capacity req/s "
          f"({cores} idle cores) | binds on an idle host | measured capacity@90% (load avg) | host cores "
          "that capacity uses |")
    print("|---|---|---|---|---|---|---|---|")
    for n in gpus:
        for placement, predicted in _placements(model, gpu, n, cap, top):
            on_both = placement.both / max(1, placement.both + placement.lm)
            cpu_ms = per_req * (on_both * both_ms + (1 - on_both) * split_ms)
            idle = cores * 1e3 / cpu_ms
            got = (measured or {}).get(f"{n}:{placement.describe()}")
            seen = f"{got['capacity90']:g} ({got['load_avg']:.1f})" if got else "-"
            used = f"{got['capacity90'] * cpu_ms / 1e3:.2f}" if got else "-"
            binds = "GPU" if predicted <= idle else "host CPU"
            print(f"| {n} | {placement.describe()} | {predicted:.1f} | {cpu_ms:.1f} | {idle:.1f} | {binds} | "
                  f"{seen} | {used} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpus", default="2", help="GPU counts (comma-separated)")
    ap.add_argument("--model", default="qwen3-tts-1.7b")
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--fractions", default="0.7,0.8,0.9,1.0,1.1,1.2",
                    help="offered rates as fractions of each placement's predicted SLO capacity (optimistic)")
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--seeds", type=int, default=2, help="arrival seeds per rate (measured and predicted)")
    ap.add_argument("--predict-only", action="store_true",
                    help="only the predictions (virtual time: seconds of CPU, no Ray), with --measured "
                    "runs' capacities beside them")
    ap.add_argument("--stop-below", type=float, default=0.6,
                    help="stop a placement's sweep after a rate with fewer requests than this in SLO")
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--top", type=int, default=3, help="placements per GPU count (N x both first)")
    ap.add_argument("--only", default="", help="run only these placements (e.g. 'lm=3,codec=1;both=4')")
    ap.add_argument("--workload", default="libritts")
    ap.add_argument("--out", type=Path, default=Path("out/bench/placements.json"))
    ap.add_argument("--inprocess-cost", type=int, default=0, metavar="REQUESTS",
                    help="only measure the engines' host CPU per chunk in one process (no Ray), then the "
                    "host capacity of each placement beside its GPU prediction")
    ap.add_argument("--ray-split-ms", type=float, default=None,
                    help="host CPU per chunk of a split (LM + codec replicas) measured under Ray Serve "
                    "(this script's lm_cpu_ms_per_chunk + codec_cpu_ms_per_chunk), for the host table")
    ap.add_argument("--ray-msgs", type=float, default=3.0, help="Ray messages per chunk of that split run")
    ap.add_argument("--measured", type=Path, action="append", default=[],
                    help="an earlier run's JSON (--out): its capacities beside the host table")
    args = ap.parse_args()
    cap = next((int(s.split("=", 1)[1]) for s in args.sets if s.startswith("max_running=")), None)
    if args.inprocess_cost:
        ms = inprocess_cost(args.model, args.gpu, args.sets, args.inprocess_cost, frames=100)
        measured = {f"{r['gpus']}:{r['placement']}": r for f in args.measured
                    for r in json.loads(f.read_text())["rows"]}
        host_budget(args.model, args.gpu, [int(x) for x in args.gpus.split(",")], cap, args.top,
                    args.workload, ms, args.ray_split_ms, args.ray_msgs, measured or None)
        return

    from voxcli.models.registry import sim_spec_for

    from voxcli.bench.targets import model_config

    utts = load_workload(args.workload)
    fractions = [float(x) for x in args.fractions.split(",")]
    frame_rate = sim_spec_for(args.model).frame_rate
    # the replicas' own config (the model's recipe and --set, the recipe's split): what is predicted for
    config = model_config(args.model, "sim", args.gpu, args.sets)
    plan = []  # (GPUs, placement, bound, predictions): all predicted before Ray starts (no CPU contention)
    for gpus in [int(x) for x in args.gpus.split(",")]:
        runs = _placements(args.model, args.gpu, gpus, cap, 99 if args.only else args.top)
        if args.only:
            runs = [r for r in runs if r[0].describe() in args.only.split(";")]
        for placement, bound in runs:
            t0 = time.process_time()
            pred = predict(config, placement, bound, utts, args.duration, args.seeds, frame_rate)
            print(f"{gpus} GPUs, {placement.describe()}: bound {bound:.2f} req/s, predicted SLO capacity "
                  + ", ".join(f"{n} {p.cell}" for n, p in pred.items())
                  + f" ({time.process_time() - t0:.0f} s CPU)", flush=True)
            plan.append((gpus, placement, bound, pred))
    if args.predict_only:
        compare(plan, {f"{r['gpus']}:{r['placement']}": r for f in args.measured
                       for r in json.loads(f.read_text())["rows"]})
        return
    rows = measure(args, plan, utts, fractions)
    print("\n| GPUs | placement | bound req/s | predicted SLO capacity (optimistic / pessimistic) | measured "
          "capacity@90% | measured / optimistic | measured / pessimistic | TTFA p50 (lowest rate) | "
          "msgs/chunk | code B/chunk | LM->codec hop p50/p90 ms | load avg |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        rl = r["relay"]
        split = rl["chunks"] > 0
        hop = (f"{rl['hop_ms_p50']:.1f}/{rl['hop_ms_p90']:.1f} (chunk 0: {rl['first_hop_ms_p50']:.1f}/"
               f"{rl['first_hop_ms_p90']:.1f})") if split else "-"
        print(f"| {r['gpus']} | {r['placement']} | {r['bound_rps']} | {r['predicted_cell']['optimistic']} / "
              f"{r['predicted_cell']['pessimistic']} | {r['measured_cell']} | {r['ratio']['optimistic']} | "
              f"{r['ratio']['pessimistic']} | {r['ttfa_p50_ms_lowest_rate']} ms | "
              f"{rl['messages_per_chunk']:.0f} | {rl['code_bytes_per_chunk']:.0f} | {hop} | "
              f"{r['load_avg']} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": {**vars(args), "out": str(args.out)}, "rows": rows}, indent=1))
    print(f"JSON: {args.out}")


def compare(plan, measured: dict[str, dict]) -> None:  # noqa: ANN001
    """The predictions beside earlier runs' measured capacities (pooled over their seeds)."""
    print("\n| GPUs | placement | bound req/s | predicted optimistic | predicted pessimistic | measured | "
          "measured / optimistic | measured / pessimistic |")
    print("|---|---|---|---|---|---|---|---|")
    for gpus, placement, bound, pred in plan:
        got = measured.get(f"{gpus}:{placement.describe()}")
        opt, pes = pred["optimistic"].capacity90, pred["pessimistic"].capacity90
        seen = got["capacity90"] if got else None
        ratios = [f"{seen / x:.2f}" if seen is not None and x else "-" for x in (opt, pes)]
        print(f"| {gpus} | {placement.describe()} | {bound:.2f} | {opt:g} ({pred['optimistic'].cell}) | "
              f"{pes:g} ({pred['pessimistic'].cell}) | {'-' if seen is None else f'{seen:g}'} | "
              f"{ratios[0]} | {ratios[1]} |")


def measure(args, plan, utts, fractions: list[float]) -> list[dict]:  # noqa: ANN001
    """Each planned placement deployed on Ray Serve (real-time sim replicas), swept at fractions of its
    optimistic prediction, `--seeds` seeds per rate."""
    import ray
    from ray import serve

    from voxcli.bench.report import capacity_cell
    from voxcli.cluster.ray_front import PlacementEngine
    from voxcli.cluster.ray_roles import deploy_replicas, describe_first

    ray.init(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    serve.start(proxy_location="Disabled")
    spec = ReplicaSpec(model=args.model, executor="sim", gpu=args.gpu, sets=args.sets)
    rows = []
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start", flush=True)
    try:
        for k, (gpus, placement, bound, pred) in enumerate(plan):
            predicted = pred["optimistic"].capacity90
            t0 = time.perf_counter()
            names = deploy_replicas(spec, placement, prefix=f"b{gpus}-{k}")
            model_spec, _, _ = describe_first(names)
            front = PlacementEngine(names, model_spec.sample_rate, model_spec.frame_seconds)
            print(f"{placement.describe()} up in {time.perf_counter() - t0:.1f} s; predicted "
                  f"{predicted:g} req/s (optimistic), {pred['pessimistic'].capacity90:g} (pessimistic)",
                  flush=True)
            sweep = SweepSpec(rates=[round(predicted * f, 2) for f in fractions], duration_s=args.duration,
                              warmup=args.warmup, seeds=args.seeds, timeout_s=120, stop_rule=False,
                              stop_below=args.stop_below, frame_rate=model_spec.frame_rate)
            target = EngineTarget(front, placement.describe(), seed=0)
            load0 = os.getloadavg()[0]

            def progress(sw, r):  # noqa: ANN001 - the sweep's callback
                print(f"  {r.rate:g} req/s -> {r.attainment * 100:5.1f}% SLO, TTFA p50 "
                      f"{(r.ttfa_p50 or 0) * 1e3:.0f} ms, {r.rejected} rejected (seeds "
                      + ", ".join(f"{rs[-1].attainment * 100:.1f}%" for rs in sw.per_seed) + ")", flush=True)

            cpu0 = _cpu(front)
            res = sweep_variant(target, Variant(placement.describe()), sweep, utts, progress)
            cpu = {k: v - cpu0.get(k, 0.0) for k, v in _cpu(front).items()}
            relay = front.relay().per_chunk()
            if relay["chunks"]:  # host CPU per chunk of each split role: what a starved host runs out of
                for role in ("lm", "codec"):
                    spent = sum(v for k, v in cpu.items() if f"-{role}-" in k)
                    relay[f"{role}_cpu_ms_per_chunk"] = 1e3 * spent / relay["chunks"]
            row = {"gpus": gpus, "placement": placement.describe(), "bound_rps": round(bound, 2),
                   "predicted": {n: p.to_dict() for n, p in pred.items()},
                   "predicted_cell": {n: p.cell for n, p in pred.items()},
                   "capacity90": res.capacity90, "capacity90_seeds": res.seed_capacities(0.90),
                   "measured_cell": capacity_cell(res, 0.90),
                   "ratio": {n: round(res.capacity90 / p.capacity90, 3) if p.capacity90 else None
                             for n, p in pred.items()},
                   "ttfa_p50_ms_lowest_rate": round((res.results[0].ttfa_p50 or 0) * 1e3, 1),
                   "load_avg": round((load0 + os.getloadavg()[0]) / 2, 1), "relay": relay,
                   "sweep": res.to_dict()}
            rows.append(row)
            print(f"  capacity@90% {row['measured_cell']} req/s vs predicted {predicted:g} "
                  f"({row['ratio']}); relay {json.dumps({k: round(v, 2) for k, v in relay.items()})}",
                  flush=True)
            front.close()
            for ns in names.values():
                for n in ns:
                    serve.delete(n)
    finally:
        serve.shutdown()
        ray.shutdown()
    return rows


if __name__ == "__main__":
    main()
