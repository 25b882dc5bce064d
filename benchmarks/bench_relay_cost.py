"""Host CPU per request of a split placement vs one engine, side by side in one run, and the LM -> codec hop.

    nice -n 10 python -m benchmarks bench_relay_cost --rates 1,4            # both=1 vs lm=1,codec=1
    nice -n 10 python -m benchmarks bench_relay_cost --placements "both=1;lm=1,codec=1@0;lm=1,codec=1@250"

Every placement is deployed at once on one local Ray instance (the real-time sim executor: a simulated
GPU on the wall clock, so the host work is all there is to measure; `@MS` after a split placement sets
its chunk hold, relay.py), and the same workload is played through each one's front door
(`PlacementEngine` in this process, as `vox batch --placement` runs it): requests of the workload's
utterances (frames from the bench's estimator, `fixed_frames`), arriving evenly at each rate. The runs
interleave: for each rate, `--rounds` rounds, each running every placement once in turn (A/B/A/B), so
a host shared with other work weighs on neighbours alike; each round's ratio is against the first
placement's run in that round, and the table gives the ratios and their median. Measured per run:

- host CPU per request of the WHOLE process tree: this process (the front door and the client) and every
  descendant (Ray's GCS, raylet, the Serve controller, the replicas' workers), as user + system CPU seconds
  read from /proc before and after the requests (after every stream ended), divided by the requests, net
  of each process's idle rate (measured for `--idle-s` with every placement up and nothing to do) times
  the run's wall time: Ray's own background work (heartbeats, metrics) is paid whatever the load. The
  other placements' (idle) replicas are not counted. Also the work alone, the placement's replicas and
  the front door: Ray's shared daemons (GCS, raylet, the Serve controller) net of idle are mostly noise
  on a loaded host;
- the LM -> codec hop (a split placement's chunks: left the LM engine -> taken by the codec replica),
  p50/p99 at each rate; Ray messages per chunk.

CPU time, not wall: a host shared with other work gives each run what the others leave, which moves wall
times, not CPU times. The load average at the start of each run is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from voxcli.bench.workloads import estimate_frames, load_workload, seeded_order
from voxcli.cluster.ray_app import ReplicaSpec
from voxcli.placement import parse_placement

TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu_s(root: int) -> tuple[float, int]:
    """User + system CPU seconds of `root` and all its descendants (live ones; /proc), and their count."""
    per = tree_cpu_by_process(root)
    return sum(c for _, c in per.values()), len(per)


def tree_cpu_by_process(root: int) -> dict[int, tuple[str, float]]:
    """User + system CPU seconds of `root` and each live descendant, by pid, with its part (from its
    command line: Ray names its workers by what they run, e.g. `ray::ServeReplica:rc1-lm-0:rc1-lm-0`)."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    name: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it exited meanwhile
        pid = int(entry)
        parent[pid] = int(fields[1])
        cpu[pid] = (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            name[pid] = _role_name(argv)
        except OSError:
            name[pid] = "?"
    out: dict[int, tuple[str, float]] = {}
    for pid in cpu:
        p = pid
        while p not in (0, 1) and p != root:
            p = parent.get(p, 0)
        if p == root:
            out[pid] = ("front door + client" if pid == root else name[pid], cpu[pid])
    return out


def _role_name(argv: list[bytes]) -> str:
    """A process's part: a Serve replica's role (its app name without the run's prefix), Ray's own
    processes by program (raylet, gcs_server, ...), idle Ray workers as `ray::IDLE`."""
    first = argv[0].decode(errors="replace").strip() if argv else "?"
    if first.startswith("ray::ServeReplica:"):
        return "replica " + first.split(":")[3]
    if first.startswith("ray::"):
        return first.split(" ")[0]
    prog = Path(first.split(" ")[0]).name
    if prog.startswith("python") and len(argv) > 1:
        prog = Path(argv[1].decode(errors="replace")).name or prog
    return prog


def _requests(workload: str, n: int, frame_rate: float) -> list[object]:
    from voxcli.models.base import SynthesisRequest

    utts = seeded_order(load_workload(workload), 0)
    return [SynthesisRequest(text=u.text, fixed_frames=estimate_frames(u.text, frame_rate))
            for u in (utts * (n // len(utts) + 1))[:n]]


def run_rate(front: object, requests: list[object], rate: float,
             idle: dict[int, float] | None = None) -> dict[str, float]:
    """Submit `requests` evenly at `rate` per second, wait for every one; the tree's CPU meanwhile (by
    part, less each process's `idle` rate over the wall time)."""
    me = os.getpid()
    per0 = tree_cpu_by_process(me)
    cpu0 = sum(c for _, c in per0.values())
    t0 = time.perf_counter()
    streams = []
    for i, r in enumerate(requests):
        due = t0 + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        streams.append(front.submit(r))  # type: ignore[attr-defined]
    failed = 0
    for s in streams:
        try:
            s.wait(300)
        except Exception:  # noqa: BLE001 - counted: a cost figure over failed requests means little
            failed += 1
    wall = time.perf_counter() - t0
    per1 = tree_cpu_by_process(me)
    parts: dict[str, float] = {}
    idle = idle or {}
    for pid, (part, c) in per1.items():  # by part (processes that started meanwhile count from zero)
        parts[part] = parts.get(part, 0.0) + c - per0.get(pid, ("", 0.0))[1] - idle.get(pid, 0.0) * wall
    return {"cpu_s": sum(c for _, c in per1.values()) - cpu0, "wall_s": wall, "failed": failed,
            "procs": len(per1), "parts_cpu_s": parts}


def idle_rate(seconds: float) -> tuple[float, dict[int, float]]:
    """The tree's CPU seconds per wall second with nothing to do (Ray's background work), in all and
    by process (by pid: Ray retitles some processes as they work, e.g. the Serve controller)."""
    me = os.getpid()
    per0, t0 = tree_cpu_by_process(me), time.perf_counter()
    time.sleep(seconds)
    per1, wall = tree_cpu_by_process(me), time.perf_counter() - t0
    rates = {pid: (c - per0.get(pid, ("", 0.0))[1]) / wall for pid, (_, c) in per1.items()}
    return sum(rates.values()), rates


def _parse_placements(text: str) -> list[tuple[str, object, float]]:
    """'both=1;lm=1,codec=1;lm=1,codec=1@0': (label, Placement, chunk hold in seconds) each; `@MS` sets
    a split placement's chunk hold (engine/hold.py's CHUNK_HOLD_S otherwise)."""
    from voxcli.engine.hold import CHUNK_HOLD_S

    out = []
    for part in text.split(";"):
        spec, _, hold = part.strip().partition("@")
        placement = parse_placement(spec)
        hold_s = float(hold) / 1e3 if hold else CHUNK_HOLD_S
        label = placement.describe() + (f" hold {1e3 * hold_s:g} ms" if placement.lm else "")
        out.append((label, placement, hold_s))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--placements", default="both=1;lm=1,codec=1",
                    help="';'-separated placements, the first the reference; `lm=1,codec=1@0`: its chunk "
                         "hold in ms (default relay.CHUNK_HOLD_S)")
    ap.add_argument("--model", default="qwen3-tts-1.7b")
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--workload", default="libritts")
    ap.add_argument("--requests", type=int, default=40, help="requests per rate and run")
    ap.add_argument("--rates", default="1,4", help="request rates (light, high), per second")
    ap.add_argument("--rounds", type=int, default=3, help="rounds per rate: each runs every placement once")
    ap.add_argument("--idle-s", type=float, default=6.0)
    ap.add_argument("--out", type=Path, default=Path("out/bench/relay_cost.json"))
    args = ap.parse_args()

    import ray
    from ray import serve

    from voxcli.cluster.ray_front import PlacementEngine
    from voxcli.cluster.ray_roles import deploy_replicas, describe_first

    sets = [*args.sets, "admission=deadline"]  # every request is served: a cost, not an SLO
    rates = [float(x) for x in args.rates.split(",")]
    placements = _parse_placements(args.placements)
    replicas = sum(p.both + p.lm + p.codec for _, p, _ in placements)  # type: ignore[attr-defined]
    # Ray's logical CPUs: every placement's replicas at once (half a CPU each on the sim), however few cores
    ray.init(include_dashboard=False, log_to_driver=False, logging_level="ERROR",
             num_cpus=max(os.cpu_count() or 1, replicas))
    serve.start(proxy_location="Disabled")
    spec = ReplicaSpec(model=args.model, executor="sim", gpu=args.gpu, sets=sets)
    rows: list[dict] = []
    print(f"host: {os.cpu_count()} CPUs, load average {_loads()} at start", flush=True)
    fronts: list[tuple[str, object, dict[str, list[str]]]] = []
    try:
        # every placement is up at once, so their runs interleave (A/B/A/B): what the host's other load
        # does to one run it does to its neighbours, and each round gives a ratio of its own
        for k, (label, placement, hold_s) in enumerate(placements):
            names = deploy_replicas(spec, placement, prefix=f"rc{k}", chunk_hold_s=hold_s)
            model_spec, _, _ = describe_first(names)
            front = PlacementEngine(names, model_spec.sample_rate, model_spec.frame_seconds)
            fronts.append((label, front, names))
        reqs = _requests(args.workload, args.requests, model_spec.frame_rate)
        for _, front, _ in fronts:
            run_rate(front, reqs[:4], 4.0)  # warm up (first calls, worker imports, links opened)
        idle, idle_per_pid = idle_rate(args.idle_s)
        print(f"idle tree (all placements up): {1e3 * idle:.0f} ms/s", flush=True)
        for rate in rates:
            for rnd in range(args.rounds):
                for label, front, names in fronts:
                    rows.append(_one_run(front, names, label, reqs, rate, rnd, idle_per_pid))
    finally:
        for _, front, _ in fronts:
            front.close()  # type: ignore[attr-defined]
        serve.shutdown()
        ray.shutdown()
    summary = _table(rows, rates, [label for label, _, _ in fronts])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": {**vars(args), "out": str(args.out)}, "idle_cpu_per_s": idle,
                                    "rows": rows, "summary": summary}, indent=1))
    print(f"JSON: {args.out}")


def _loads() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def _one_run(front: object, names: dict[str, list[str]], label: str, reqs: list[object], rate: float,
             rnd: int, idle: dict[int, float]) -> dict:
    """One placement's run at one rate: its CPU per request, net of idle, counting its own replicas (the
    other placements' idle replicas are not its cost) and the shared processes (front door, Ray's own)."""
    own = {f"replica {n}" for ns in names.values() for n in ns}
    relay0 = front.relay().raw() if names["lm"] else None  # type: ignore[attr-defined]
    load = _loads()
    got = run_rate(front, reqs, rate, idle)
    parts = {part: 1e3 * cpu / len(reqs) for part, cpu in got.pop("parts_cpu_s").items()
             if part in own or not part.startswith("replica ")}
    row = {"placement": label, "rate": rate, "round": rnd, "requests": len(reqs), "load_avg": load, **got,
           "net_cpu_ms_per_request": sum(parts.values()),
           "replicas_ms_per_request": sum(v for k, v in parts.items() if k in own),
           "front_ms_per_request": parts.get("front door + client", 0.0),
           "parts_net_ms_per_request": {k: round(v, 2)
                                        for k, v in sorted(parts.items(), key=lambda kv: -kv[1])}}
    if relay0 is not None:
        row["relay"] = _relay_delta(front, relay0)
    hop = row.get("relay", {})
    print(f"round {rnd} {label:>26s} @ {rate:g} req/s: net {row['net_cpu_ms_per_request']:.1f} ms host CPU "
          f"per request (replicas {row['replicas_ms_per_request']:.1f}, front door "
          f"{row['front_ms_per_request']:.1f}; wall {got['wall_s']:.1f} s; {got['failed']} failed; "
          f"load {load})" + (f"; hop p50/p99 {hop['hop_ms_p50']:.1f}/{hop['hop_ms_p99']:.1f} ms, "
                             f"{hop['chunks_per_item']:.2f} chunks/item, {hop['messages_per_chunk']:.2f} "
                             "msgs/chunk" if hop else ""), flush=True)
    return row


def _relay_delta(front: object, before: dict) -> dict[str, float]:
    """This rate's relay figures: what the LM replicas counted since `before` (old or new layout)."""
    from voxcli.cluster import ray_roles

    now = front.relay().raw()  # type: ignore[attr-defined]
    delta = {k: now[k] - before[k] for k in now if k not in ("hops", "first_hops")}
    hops = sorted(now["hops"][len(before["hops"]):])
    delta["hops"] = hops
    delta["first_hops"] = now.get("first_hops", [])[len(before.get("first_hops", [])):]
    out = ray_roles.RelayStats.merged([delta]).per_chunk()
    for name, q in (("hop_ms_p50", 0.5), ("hop_ms_p99", 0.99)):
        out[name] = 1e3 * hops[min(len(hops) - 1, int(len(hops) * q))] if hops else float("nan")
    return out


def _table(rows: list[dict], rates: list[float], labels: list[str]) -> dict:
    """Per rate and placement: the median net CPU per request over the rounds, and each round's ratio to
    the first placement's run of the same round (its neighbour in time); the median of those ratios."""
    import statistics

    summary: dict = {}
    print("\n| rate req/s | placement | net host CPU ms/request, whole tree (median of rounds) "
          "| / reference, per round | median | replicas + front door ms/request | / reference, per round "
          "| median | hop p50/p99 ms | chunks/item | msgs/chunk | load avg |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    med = statistics.median

    def ratios(at: list[dict], ref: dict[int, dict], key: str) -> list[float]:
        return [r[key] / ref[r["round"]][key] for r in at if r["round"] in ref and ref[r["round"]][key] > 0]

    for rate in rates:
        ref = {r["round"]: r for r in rows if r["rate"] == rate and r["placement"] == labels[0]}
        for label in labels:
            at = [r for r in rows if r["rate"] == rate and r["placement"] == label]
            for r in at:  # the work itself: the placement's replicas and the front door, no Ray daemon
                r["work_ms_per_request"] = r["replicas_ms_per_request"] + r["front_ms_per_request"]
            tree, work = ratios(at, ref, "net_cpu_ms_per_request"), ratios(at, ref, "work_ms_per_request")
            hops = [r["relay"] for r in at if "relay" in r]
            cell = {"net_ms": med([r["net_cpu_ms_per_request"] for r in at]),
                    "work_ms": med([r["work_ms_per_request"] for r in at]),
                    "replicas_ms": med([r["replicas_ms_per_request"] for r in at]),
                    "front_ms": med([r["front_ms_per_request"] for r in at]),
                    "ratios": tree, "median_ratio": med(tree) if tree else float("nan"),
                    "work_ratios": work, "median_work_ratio": med(work) if work else float("nan"),
                    "failed": sum(r["failed"] for r in at)}
            if hops:
                cell.update({k: med([h[k] for h in hops]) for k in
                             ("hop_ms_p50", "hop_ms_p99", "chunks_per_item", "messages_per_chunk")})
            summary[f"{label} @ {rate:g}"] = cell
            hop = (f"{cell['hop_ms_p50']:.1f}/{cell['hop_ms_p99']:.1f} | {cell['chunks_per_item']:.2f} | "
                   f"{cell['messages_per_chunk']:.2f}") if hops else "- | - | -"
            print(f"| {rate:g} | {label} | {cell['net_ms']:.1f} | {' '.join(f'{x:.2f}' for x in tree)} | "
                  f"{cell['median_ratio']:.2f}x | {cell['work_ms']:.1f} | "
                  f"{' '.join(f'{x:.2f}' for x in work)} | {cell['median_work_ratio']:.2f}x | {hop} | "
                  f"{' '.join(r['load_avg'] for r in at)} |")
    return summary


if __name__ == "__main__":
    main()
