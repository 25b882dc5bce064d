"""Host CPU per streamed item between two Ray processes: Serve streaming handle vs plain actor generator.

    nice -n 10 python -m benchmarks bench_stream_item_cost                  # 1500 items, one every 4 ms
    nice -n 10 python -m benchmarks bench_stream_item_cost --items 3000 --period-ms 2 --rounds 3

The question it answers (voxcli/cluster/relay.py): what one item of a long-lived link between two
replicas costs the host, by transport, so the relay's choice (Serve's streaming handles, and holding
chunks so that several share an item) rests on a figure. One process (the source) yields small items
(a list of one int) at a fixed period; another (the sink) pulls them and counts, exactly as a codec
replica pulls its codes link:

- serve: both are Serve deployments; the sink pulls `handle.options(stream=True)` (Serve's router and
  its DeploymentResponseGenerator on the sink's side, Serve's replica wrapper on the source's);
- actor: both are plain Ray actors; the sink iterates the source's async generator method
  (`ObjectRefGenerator`, `await ref` per item), Ray core's own path with nothing of Serve.

Measured: user + system CPU of the whole process tree (this driver, Ray's processes, both pairs' workers)
from /proc over each pull, less the tree's idle rate over its wall time, per item; the transports run
interleaved (serve, actor, serve, actor ...) so a loaded host's drift falls on both. CPU, not wall.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from typing import Any

from benchmarks.bench_relay_cost import idle_rate, tree_cpu_by_process


class Source:
    """Yields `n` small items, one every `period_s` (a link's sender)."""

    async def items(self, n: int, period_s: float) -> Any:
        for i in range(n):
            await asyncio.sleep(period_s)
            yield [i]


class ServeSink:
    """Pulls a Serve streaming call on the source deployment (a codec replica's codes link today)."""

    def __init__(self, source: Any) -> None:
        self.source = source

    async def pull(self, n: int, period_s: float) -> int:
        got = 0
        async for _ in self.source.options(method_name="items", stream=True).remote(n, period_s):
            got += 1
        return got


class ActorSink:
    """Pulls a plain actor's streaming generator (Ray core, no Serve)."""

    def __init__(self, source: Any) -> None:
        self.source = source

    async def pull(self, n: int, period_s: float) -> int:
        got = 0
        async for ref in self.source.items.options(num_returns="streaming").remote(n, period_s):
            await ref
            got += 1
        return got


def _tree_cpu() -> float:
    return sum(c for _, c in tree_cpu_by_process(os.getpid()).values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--items", type=int, default=1500)
    ap.add_argument("--period-ms", type=float, default=4.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--idle-s", type=float, default=5.0)
    args = ap.parse_args()

    import ray
    from ray import serve

    ray.init(include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    serve.start(proxy_location="Disabled")
    opts = {"ray_actor_options": {"num_cpus": 0}, "max_ongoing_requests": 100}
    sink_app = serve.deployment(ServeSink, name="sink", **opts).bind(
        serve.deployment(Source, name="source", **opts).bind())
    serve_sink = serve.run(sink_app, name="stream-cost", route_prefix=None)
    actor_source = ray.remote(num_cpus=0)(Source).remote()
    actor_sink = ray.remote(num_cpus=0)(ActorSink).remote(actor_source)
    period = args.period_ms / 1e3

    def pull_serve(n: int) -> int:
        return serve_sink.pull.remote(n, period).result(timeout_s=600)

    def pull_actor(n: int) -> int:
        return ray.get(actor_sink.pull.remote(n, period), timeout=600)

    pulls = {"serve": pull_serve, "actor": pull_actor}
    for pull in pulls.values():
        pull(50)  # warm up: workers started, first calls made
    idle, _ = idle_rate(args.idle_s)
    print(f"host: {os.cpu_count()} CPUs, load {'/'.join(f'{x:.1f}' for x in os.getloadavg())}; "
          f"idle tree {1e3 * idle:.0f} ms/s", flush=True)
    got: dict[str, list[float]] = {name: [] for name in pulls}
    try:
        for rnd in range(args.rounds):
            for name, pull in pulls.items():
                cpu0, t0 = _tree_cpu(), time.perf_counter()
                n = pull(args.items)
                cpu, wall = _tree_cpu() - cpu0, time.perf_counter() - t0
                per = 1e3 * (cpu - idle * wall) / n
                got[name].append(per)
                print(f"round {rnd} {name:>5s}: {n} items in {wall:.1f} s, {1e3 * cpu / n:.3f} ms CPU per "
                      f"item ({per:.3f} net of idle)", flush=True)
    finally:
        serve.shutdown()
        ray.shutdown()
    med = {name: statistics.median(v) for name, v in got.items()}
    print(f"\nmedian net host CPU per item: serve {med['serve']:.3f} ms, actor {med['actor']:.3f} ms "
          f"(actor / serve {med['actor'] / med['serve']:.2f})")


if __name__ == "__main__":
    main()
