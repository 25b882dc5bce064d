"""`vox bench --url` side by side: the paired sweep takes turns between the variants at each rate."""

from __future__ import annotations

from voxcli.bench.http_target import run_paired_sweep
from voxcli.bench.metrics import DONE, RequestRecord
from voxcli.bench.sweep import SweepSpec, Variant
from voxcli.bench.workloads import Utterance


class FakeTarget:
    def __init__(self, name: str, log: list[tuple[str, int]], fail_from: float | None = None) -> None:
        self.name, self.log, self.fail_from, self.closed = name, log, fail_from, False

    def play(self, arrivals, timeout_s):
        self.log.append((self.name, len(arrivals)))
        ok = self.fail_from is None or len(arrivals) < self.fail_from
        return [RequestRecord(sent=a.at, status=DONE if ok else "failed",
                              deliveries=[(a.at + 0.05, 5.0)] if ok else [], finished=a.at + 5.0)
                for a in arrivals]

    def close(self) -> None:
        self.closed = True


def test_variants_take_turns_and_each_keeps_its_own_stop_rule():
    log: list[tuple[str, int]] = []
    targets = {"in-process": FakeTarget("in-process", log), "http": FakeTarget("http", log, fail_from=25)}
    spec = SweepSpec(rates=[2.0, 4.0, 8.0], duration_s=5.0, warmup=3, seeds=2)
    result = run_paired_sweep(lambda v: targets[v.label], [Variant("in-process"), Variant("http")], spec,
                              [Utterance("a", "Some words here.")])
    order = [name for name, _ in log]
    assert order[:2] == ["in-process", "http"]  # warm-ups
    # rate 1: A, B; rate 2: B, A (each plays its two seeds in its turn)
    assert order[2:10] == ["in-process"] * 2 + ["http"] * 4 + ["in-process"] * 2
    by = {s.variant.label: s for s in result.sweeps}
    assert [r.rate for r in by["in-process"].results] == [2.0, 4.0, 8.0]
    assert by["http"].stopped_after is not None and by["http"].capacity90 < by["in-process"].capacity90
    assert [len(per) for per in by["in-process"].per_seed] == [3, 3]  # one capacity per seed
    assert all(t.closed for t in targets.values())
