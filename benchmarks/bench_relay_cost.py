"""Host CPU per request of a split placement vs one engine, side by side in one run, and the LM -> codec hop.

    nice -n 10 python -m benchmarks bench_relay_cost                        # both=1 vs lm=1,codec=1
    nice -n 10 python -m benchmarks bench_relay_cost --requests 200 --rates 2,8

Each placement is deployed on the same local Ray instance in turn (the real-time sim executor: a simulated
GPU on the wall clock, so the host work is all there is to measure), and the same workload is played
through the front door (`PlacementEngine` in this process, as `vox batch --placement` runs it): requests
of the workload's utterances (frames from the bench's estimator, `fixed_frames`), arriving evenly at
each rate. Measured per placement and rate:

- host CPU per request of the WHOLE process tree: this process (the front door and the client) and every
  descendant (Ray's GCS, raylet, the Serve controller, the replicas' workers), as user + system CPU seconds
  read from /proc before and after the requests (after every stream ended), divided by the requests. The
  tree's idle CPU rate (measured for `--idle-s` with the placement up and nothing to do) times the run's
  wall time is printed beside it and subtracted in the "net" column: Ray's own background work (heartbeats,
  metrics) is paid whatever the load, and on a loaded host the wall time differs between runs;
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


def run_rate(front: object, requests: list[object], rate: float) -> dict[str, float]:
    """Submit `requests` evenly at `rate` per second, wait for every one; the tree's CPU meanwhile."""
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
    for pid, (part, c) in per1.items():  # by part (processes that started meanwhile count from zero)
        parts[part] = parts.get(part, 0.0) + c - per0.get(pid, ("", 0.0))[1]
    return {"cpu_s": sum(c for _, c in per1.values()) - cpu0, "wall_s": wall, "failed": failed,
            "procs": len(per1), "parts_cpu_s": parts}


def idle_rate(seconds: float) -> tuple[float, dict[str, float]]:
    """The tree's CPU seconds per wall second with nothing to do (Ray's background work), in all and
    by part."""
    me = os.getpid()
    per0, t0 = tree_cpu_by_process(me), time.perf_counter()
    time.sleep(seconds)
    per1, wall = tree_cpu_by_process(me), time.perf_counter() - t0
    parts: dict[str, float] = {}
    for pid, (part, c) in per1.items():
        parts[part] = parts.get(part, 0.0) + (c - per0.get(pid, ("", 0.0))[1]) / wall
    return sum(parts.values()), parts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--placements", default="both=1;lm=1,codec=1", help="';'-separated placements")
    ap.add_argument("--model", default="qwen3-tts-1.7b")
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--workload", default="libritts")
    ap.add_argument("--requests", type=int, default=40, help="requests per rate")
    ap.add_argument("--rates", default="1,6", help="request rates (light, high), per second")
    ap.add_argument("--idle-s", type=float, default=4.0)
    ap.add_argument("--out", type=Path, default=Path("out/bench/relay_cost.json"))
    args = ap.parse_args()

    import ray
    from ray import serve

    from voxcli.cluster.ray_front import PlacementEngine
    from voxcli.cluster.ray_roles import deploy_replicas, describe_first

    sets = [*args.sets, "admission=deadline"]  # every request is served: a cost, not an SLO
    rates = [float(x) for x in args.rates.split(",")]
    ray.init(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    serve.start(proxy_location="Disabled")
    spec = ReplicaSpec(model=args.model, executor="sim", gpu=args.gpu, sets=sets)
    rows = []
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start", flush=True)
    try:
        for k, text in enumerate(args.placements.split(";")):
            placement = parse_placement(text)
            names = deploy_replicas(spec, placement, prefix=f"rc{k}")
            model_spec, _, _ = describe_first(names)
            front = PlacementEngine(names, model_spec.sample_rate, model_spec.frame_seconds)
            reqs = _requests(args.workload, args.requests, model_spec.frame_rate)
            run_rate(front, reqs[:4], 4.0)  # warm up (first calls, worker imports)
            idle, idle_parts = idle_rate(args.idle_s)
            signals = getattr(front, "signals", None)  # pushed load reports (absent before the relay change)
            if signals is not None:
                silent = [b.name for bs in front.backends.values() for b in bs if b.stats is None]
                print(f"{placement.describe()}: {signals.reports} load reports pushed so far"
                      + (f"; none yet from {silent}" if silent else ""), flush=True)
            for rate in rates:
                relay0 = front.relay().raw() if names["lm"] else None
                load = os.getloadavg()[0]
                got = run_rate(front, reqs, rate)
                row = {"placement": placement.describe(), "rate": rate, "requests": len(reqs),
                       "load_avg": round(load, 1), "idle_cpu_per_s": round(idle, 4), **got,
                       "cpu_ms_per_request": 1e3 * got["cpu_s"] / len(reqs),
                       "net_cpu_ms_per_request":
                           1e3 * max(0.0, got["cpu_s"] - idle * got["wall_s"]) / len(reqs)}
                row["parts_net_ms_per_request"] = {
                    part: round(1e3 * (cpu - idle_parts.get(part, 0.0) * got["wall_s"]) / len(reqs), 2)
                    for part, cpu in sorted(got.pop("parts_cpu_s").items(), key=lambda kv: -kv[1])}
                if relay0 is not None:
                    row["relay"] = _relay_delta(front, relay0)
                rows.append(row)
                hop = row.get("relay", {})
                print(f"{row['placement']:>16s} @ {rate:g} req/s: {row['cpu_ms_per_request']:.1f} ms "
                      f"host CPU per request (net of idle {row['net_cpu_ms_per_request']:.1f}; idle tree "
                      f"{1e3 * idle:.0f} ms/s; {got['procs']} processes; wall {got['wall_s']:.1f} s; "
                      f"{got['failed']} failed; load {load:.1f})"
                      + (f"; hop p50/p99 {hop['hop_ms_p50']:.1f}/{hop['hop_ms_p99']:.1f} ms, "
                         f"{hop['messages_per_chunk']:.2f} msgs/chunk" if hop else ""), flush=True)
                top = list(row["parts_net_ms_per_request"].items())[:8]
                print("    net ms/request by part: " + ", ".join(f"{k} {v:.1f}" for k, v in top), flush=True)
            front.close()
            for ns in names.values():
                for n in ns:
                    serve.delete(n)
    finally:
        serve.shutdown()
        ray.shutdown()
    _table(rows, rates)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": {**vars(args), "out": str(args.out)}, "rows": rows}, indent=1))
    print(f"JSON: {args.out}")


def _relay_delta(front: object, before: dict) -> dict[str, float]:
    """This rate's relay figures: what the LM replicas counted since `before` (old or new layout)."""
    from voxcli.cluster import ray_roles

    now = front.relay().raw()  # type: ignore[attr-defined]
    delta = {k: now[k] - before[k] for k in now if k != "hops"}
    hops = sorted(now["hops"][len(before["hops"]):])
    delta["hops"] = hops
    out = ray_roles.RelayStats.merged([delta]).per_chunk()
    for name, q in (("hop_ms_p50", 0.5), ("hop_ms_p99", 0.99)):
        out[name] = 1e3 * hops[min(len(hops) - 1, int(len(hops) * q))] if hops else float("nan")
    return out


def _table(rows: list[dict], rates: list[float]) -> None:
    print("\n| rate req/s | placement | host CPU ms/request (whole tree) | net of idle | split / both (net) "
          "| "
          "hop p50/p99 ms | msgs/chunk | load avg |")
    print("|---|---|---|---|---|---|---|---|")
    for rate in rates:
        at = [r for r in rows if r["rate"] == rate]
        both = next((r for r in at if r["placement"].startswith("both=") and "lm" not in r["placement"]),
                    None)
        for r in at:
            ratio = f"{r['net_cpu_ms_per_request'] / both['net_cpu_ms_per_request']:.2f}x" if both else "-"
            hop = r.get("relay")
            hops = f"{hop['hop_ms_p50']:.1f}/{hop['hop_ms_p99']:.1f}" if hop else "-"
            msgs = f"{hop['messages_per_chunk']:.2f}" if hop else "-"
            print(f"| {rate:g} | {r['placement']} | {r['cpu_ms_per_request']:.1f} | "
                  f"{r['net_cpu_ms_per_request']:.1f} | {ratio} | {hops} | {msgs} | {r['load_avg']} |")


if __name__ == "__main__":
    main()
