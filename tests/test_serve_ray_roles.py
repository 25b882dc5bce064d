"""A disaggregated placement on Ray Serve (2 LM-only + 1 codec-only replica, real-time sim executors, CPU):
a streamed request's audio equals the single engine's, cancel frees pages and slots on both roles, and a
codec replica killed mid-stream fails its request with a reason (nothing hangs: every wait has a timeout).
One Ray instance for the module."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("ray.serve", reason="Ray Serve is not installed (pip install 'voxcli[ray]')")

from support.roles_harness import one_engine_audio  # noqa: E402
from voxcli.models.base import SynthesisRequest  # noqa: E402

MODEL, GPU = "qwen3-tts-1.7b", "h100"


@pytest.fixture(scope="module")
def placement():
    import ray
    from ray import serve

    from voxcli.cluster.ray_app import ReplicaSpec
    from voxcli.cluster.ray_front import PlacementEngine
    from voxcli.cluster.ray_roles import deploy_replicas, describe_first
    from voxcli.placement import Placement

    if ray.is_initialized():  # a CLI test earlier in this process (vox batch --replicas) left its Ray up
        ray.shutdown()
    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    serve.start(http_options={"host": "127.0.0.1", "port": _free_port()})
    try:
        spec = ReplicaSpec(model=MODEL, executor="sim", gpu=GPU)
        names = deploy_replicas(spec, Placement(lm=2, codec=1), prefix="t", pcm_scale=1.0)
        model_spec, _ = describe_first(names)
        front = PlacementEngine(names, model_spec.sample_rate, model_spec.frame_seconds)
        yield front, names
        front.close()
    finally:
        serve.shutdown()
        ray.shutdown()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]



def _stats(front) -> dict[str, dict[str, float]]:
    front._poll_once()
    return {b.name: dict(b.stats or {}) for bs in front.backends.values() for b in bs}


def _until_freed(front, timeout: float = 20.0) -> dict:
    end = time.monotonic() + timeout
    while True:
        stats = _stats(front)
        held = sum(s.get("kv_pages_used", 0) + s.get("codec_slots_used", 0) for s in stats.values())
        if held == 0 and all(stats.values()):
            return stats
        if time.monotonic() > end:
            raise AssertionError(f"pages or slots still held: {stats}")
        time.sleep(0.1)


def test_split_stream_equals_single_engine(placement):
    front, names = placement
    frames = [5, 33, 70]
    ref = one_engine_audio(MODEL, GPU, frames)
    streams = [front.submit(SynthesisRequest(text=f"r{i}", fixed_frames=n)) for i, n in enumerate(frames)]
    for s, want in zip(streams, ref, strict=True):
        got = []
        for chunk in s:  # streamed: chunk by chunk as the codec replica decodes them
            got.append(chunk.pcm)
        audio = np.concatenate(got)
        assert audio.shape == want.shape and np.array_equal(audio, want)
        assert s.status == "done"
    relay = front.relay().per_chunk()
    # per chunk: the PCM, and a share of a codes link item (one item carries every chunk ready then); per
    # request: at most 2 work link items (the request, its first audio's time); no call but `audio`
    assert 1 < relay["messages_per_chunk"] <= 2 + 2 * len(frames) / relay["chunks"]
    assert relay["chunks"] >= 3 and relay["code_bytes_per_chunk"] > 0
    assert len(relay_hops(front)) == relay["chunks"]  # every chunk's hop, timed by the codec replica
    _until_freed(front)


def relay_hops(front) -> list[float]:
    return list(front.relay().lm_to_codec_s)


def test_routing_signals_are_pushed_and_a_bad_request_is_refused_without_a_round_trip(placement):
    """The replicas push their stats over one streaming call each (no poll per period); `submit` asks no
    replica before routing: a request the model refuses comes back from the LM replica's submit as the
    stream's InputError (what a server answers 400), and frees nothing it did not take."""
    from voxcli.models.base import InputError

    front, names = placement
    end = time.monotonic() + 20
    while not all(b.stats for bs in front.backends.values() for b in bs):
        assert time.monotonic() < end, "no pushed report from every replica"
        time.sleep(0.05)
    assert front.signals.reports >= len(names["lm"]) + len(names["codec"])
    bad = front.submit(SynthesisRequest(text="[fail:input] no", fixed_frames=5))  # returns at once
    with pytest.raises(InputError, match="asked to be refused"):
        bad.wait(30)
    assert bad.status == "failed"
    good = front.submit(SynthesisRequest(text="fine", fixed_frames=5))
    assert good.wait(30).shape[0] == 5 * 1920 and good.status == "done"
    _until_freed(front)


def _replica_series(front) -> dict[str, float]:
    """The front door's per-replica /metrics series, as {'name{labels}': value} (fresh: one gather)."""
    from prometheus_client import CollectorRegistry, generate_latest

    from voxcli.cluster.ray_metrics import ReplicaCollector

    front.gather_metrics()
    registry = CollectorRegistry()
    registry.register(ReplicaCollector(front.metric_rows))
    lines = generate_latest(registry).decode().splitlines()
    return {k: float(v) for k, v in (x.rsplit(" ", 1) for x in lines if x and not x.startswith("#"))}


def test_metrics_per_replica(placement):
    front, names = placement
    before = _replica_series(front)
    for name in names["lm"] + names["codec"]:
        role = "lm" if "-lm-" in name else "codec"
        assert before[f'vox_replica_up{{replica="{name}",role="{role}"}}'] == 1.0
    streams = [front.submit(SynthesisRequest(text=f"m{i}", fixed_frames=25)) for i in range(4)]
    for s in streams:
        s.wait(30)
    _until_freed(front)
    after = _replica_series(front)

    def delta(series: str) -> float:
        return after.get(series, 0.0) - before.get(series, 0.0)

    def summed(prefix: str, role: str) -> float:
        done = 'outcome="done",' if "requests" in prefix else ""
        return sum(delta(f'{prefix}{{{done}replica="{n}",role="{role}"}}') for n in names[role])

    # each replica counts its own: the 4 requests were done once on an LM replica and once on the codec
    assert summed("vox_replica_requests_total", "lm") == 4
    assert summed("vox_replica_requests_total", "codec") == 4
    chunks = summed("vox_replica_relay_chunks_total", "lm")
    assert chunks >= 4 and summed("vox_replica_audio_chunks_total", "codec") == chunks
    books = front.backends["lm"][0].handle.describe.remote().result(timeout_s=30)[0].codebooks
    assert summed("vox_replica_relay_code_bytes_total", "lm") == 4 * 25 * books * 8  # int64 codes
    assert 1 <= summed("vox_replica_relay_items_total", "lm") <= chunks
    codec = names["codec"][0]
    assert after[f'vox_replica_codec_slots_used{{replica="{codec}",role="codec"}}'] == 0


def test_a_later_sentence_carries_its_playback_deadline(placement):
    """`continues=` through the front door: the later sentence goes to an LM replica with the end of the
    earlier sentence's audio (epoch seconds), which admits it as a continuation (test_roles checks the
    deadlines on both sides of the hop); its audio streams as any request's."""
    front, _ = placement
    s1 = front.submit(SynthesisRequest(text="first", fixed_frames=40))
    s1.wait(30)
    s2 = front.submit(SynthesisRequest(text="second", fixed_frames=20), continues=s1)
    frame_s = front.frame_seconds
    assert s2.playback.from_epoch == pytest.approx(s1.playback.first_epoch + 40 * frame_s, abs=1e-6)
    assert s2.wait(30).shape[0] == 20 * round(front.sample_rate * frame_s) and s2.status == "done"
    assert s2.playback.audio_s == pytest.approx(20 * frame_s)
    _until_freed(front)


def test_front_door_serves_the_openai_api_and_metrics(placement):
    import httpx
    from ray import serve

    from voxcli.cluster.ray_front import _front_door
    from voxcli.cluster.ray_roles import describe_first

    front, names = placement
    model_spec, model = describe_first(names)
    serve.run(_front_door(names, model_spec, model, None, {}), name="t-front", route_prefix="/")
    url = f"http://127.0.0.1:{serve.context._global_client.http_config.port}"
    body = {"model": model, "input": "Hello there.", "voice": "alloy", "response_format": "pcm",
            "fixed_frames": 40}
    with httpx.stream("POST", f"{url}/v1/audio/speech", json=body, timeout=30) as r:
        assert r.status_code == 200, r.read()
        pieces = [b for b in r.iter_bytes()]
    assert sum(map(len, pieces)) == 40 * model_spec.samples_per_frame * 2  # int16 PCM of 40 frames
    bad = httpx.post(f"{url}/v1/audio/speech", json={**body, "input": "[fail:input] x"}, timeout=30)
    assert bad.status_code == 400 and "refused" in bad.text, bad.text  # the model check, on a replica
    metrics = httpx.get(f"{url}/metrics", timeout=30).text
    assert 'vox_requests_total{outcome="done"} 1.0' in metrics and "vox_kv_pages_used" in metrics
    # the replicas' own series too: the front door's poller thread gathers them every METRICS_PERIOD_S, so a
    # fast request can be done before its first gather; read until they appear (the deadline only turns a
    # poller that never gathers into a failure, whatever the machine's speed)
    wanted = [f'vox_replica_up{{replica="{name}",role="lm"}} 1.0' for name in names["lm"]]
    end = time.monotonic() + 60
    while not all(w in metrics for w in wanted) and time.monotonic() < end:
        time.sleep(0.2)
        metrics = httpx.get(f"{url}/metrics", timeout=30).text
    for w in wanted:
        assert w in metrics
    serve.delete("t-front")


def test_cancel_frees_pages_and_slots_on_both_roles(placement):
    front, _ = placement
    s = front.submit(SynthesisRequest(text="a long one", fixed_frames=3000))
    it = iter(s)
    next(it)
    stats = _stats(front)
    assert sum(v.get("kv_pages_used", 0) for v in stats.values()) > 0
    assert sum(v.get("codec_slots_used", 0) for v in stats.values()) == 1
    s.cancel()
    end = time.monotonic() + 20
    while not s.finished and time.monotonic() < end:
        time.sleep(0.05)
    assert s.status == "cancelled"
    _until_freed(front)


def test_codec_replica_killed_mid_stream_fails_with_reason(placement):
    import ray

    front, names = placement
    s = front.submit(SynthesisRequest(text="a long one", fixed_frames=3000))
    next(iter(s))
    codec_actor = next(a for a in ray.util.list_named_actors(all_namespaces=True)
                       if "SERVE_REPLICA" in a["name"] and names["codec"][0] in a["name"])
    ray.kill(ray.get_actor(codec_actor["name"], namespace=codec_actor["namespace"]))
    with pytest.raises(Exception, match="codec replica t-codec-0 failed mid-stream"):
        s.wait(30)
    assert s.status == "failed"
    # the LM replica that generated it gave its pages back (its work link to the dead codec replica broke)
    end = time.monotonic() + 20
    while time.monotonic() < end:
        lm = [v for k, v in _stats(front).items() if "-lm-" in k]
        if lm and all(v and v.get("kv_pages_used", 1) == 0 for v in lm):
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"LM pages still held: {_stats(front)}")


@pytest.mark.slow
def test_batch_over_a_placement_writes_every_item(placement, tiny_custom_voice, tmp_path, monkeypatch):
    """`vox batch --placement lm=1,codec=1` on the tiny model (cpu executor), in this module's Ray."""
    import json

    from typer.testing import CliRunner

    from voxcli import cli

    monkeypatch.setattr(cli.console, "STATE", cli.console._State())
    lines = tmp_path / "lines.txt"
    lines.write_text("Hello there, friend.\nHow are you today?\n")
    out = tmp_path / "out"
    r = CliRunner().invoke(cli.app, ["batch", str(lines), "-o", str(out), "-m", str(tiny_custom_voice),
                                     "--greedy", "--max-frames", "8", "--placement", "lm=1,codec=1",
                                     "--quiet"])
    assert r.exit_code == 0, r.output
    records = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert sorted(x["id"] for x in records) == ["0001", "0002"], records
    assert all(x["status"] == "ok" and (out / x["file"]).exists() for x in records), records
