"""Scale-out on Ray Serve. Ray is an optional extra for users (`pip install 'voxcli[ray]'`) and pinned in the
test extra, so CI runs these (a bare install without it skips them). The capacity measurement is
benchmarks/bench_replicas.py; placements of roles: tests/test_serve_ray_roles.py."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed (pip install 'voxcli[serve]')")
pytest.importorskip("ray.serve.request_router",
                    reason="Ray Serve is not installed (pip install 'voxcli[ray]')")


@dataclass
class FakeReplica:
    replica_id: str
    routing_stats: dict[str, Any] = field(default_factory=dict)


def _router():
    from voxcli.cluster.ray_router import MostSlackRouter

    router = MostSlackRouter.__new__(MostSlackRouter)  # the routing policy alone, without a Serve handle
    router.initialize_state()
    return router


def test_most_slack_replica_first_and_bursts_spread_between_reports():
    router = _router()
    a = FakeReplica("a", {"slack": 5.0, "seq": 1.0})
    b = FakeReplica("b", {"slack": 3.0, "seq": 1.0})
    c = FakeReplica("c", {})  # not reported yet: slack 0

    def choose() -> str:
        ranks = asyncio.run(router.choose_replicas([c, b, a]))
        assert [len(r) for r in ranks] == [1, 2]
        return ranks[0][0].replica_id

    picks = []
    for _ in range(4):
        pick = choose()
        picks.append(pick)
        router.on_request_routed(None, pick, None)
    assert picks == ["a", "a", "a", "b"] or picks == ["a", "a", "b", "a"]  # 5,4,3(tie with b=3),...
    a.routing_stats = {"slack": 1.0, "seq": 2.0}  # a fresh report replaces the local count
    assert choose() == "b"


def test_routing_stats_slack_falls_as_streams_are_held():
    from voxcli.models.base import SynthesisRequest

    from voxcli.server.service import SpeechService
    from voxcli.session import sim_session

    service = SpeechService(sim_session("qwen3-tts-1.7b", "h100"))
    try:
        idle = service.routing_stats()
        assert idle["held"] == 0 and idle["slack"] == idle["capacity"] > 8
        long = SynthesisRequest(text="Hold on.", fixed_frames=500)
        streams = [service.engine.submit(long) for _ in range(3)]
        for s in streams:
            next(iter(s))
        busy = service.routing_stats()
        assert busy["held"] == 3 and busy["slack"] == busy["capacity"] - 3 and busy["seq"] == idle["seq"] + 1
        for s in streams:
            s.cancel()
    finally:
        service.close()


@pytest.mark.slow
def test_batch_over_two_replicas_writes_every_item_and_resumes(tiny_custom_voice, tmp_path, monkeypatch):
    import json

    from typer.testing import CliRunner

    from voxcli import cli

    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    lines = tmp_path / "lines.txt"
    lines.write_text("Hello there, friend.\nHow are you today?\nThis is the third line.\n")
    out = tmp_path / "out"
    args = ["batch", str(lines), "-o", str(out), "-m", str(tiny_custom_voice), "--greedy", "--max-frames",
            "8", "--replicas", "2", "--quiet"]
    r = CliRunner().invoke(cli.app, args)
    assert r.exit_code == 0, r.output
    records = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert sorted(x["id"] for x in records) == ["0001", "0002", "0003"], records
    assert all(x["status"] == "ok" and (out / x["file"]).exists() for x in records), records
    again = CliRunner().invoke(cli.app, args[:-1])  # same batch, not quiet: nothing left to do
    assert again.exit_code == 0 and "3 already done" in again.stderr, again.output
