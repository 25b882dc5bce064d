"""Issue 12, row by row: each test failed on the code before the fix (the row number is in its name)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
from support.cli_harness import DemoHarness
from voxcli.models.base import InputError, SamplingParams, SynthesisRequest

from voxcli.config import ChunkSchedule, EngineConfig

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    h = DemoHarness(tmp_path_factory.mktemp("rows_cache"))
    yield h
    h.close()


FAST = ["--greedy", "--max-frames", "4"]


# --- row 1: one invalid-UTF-8 line fails alone ------------------------------------------------------
def test_row1_bad_utf8_line_costs_one_manifest_error(demo, tmp_path):
    out = tmp_path / "out"
    r = demo.run(["batch", "-m", "demo", *FAST, "-", "-o", str(out)],
                 input=b"Good one.\nbad \xff\xfe line\nGood two.\n")
    assert r.code == 1 and "internal error" not in r.stderr, r.stderr
    recs = [json.loads(x) for x in (out / "manifest.jsonl").read_text().splitlines()]
    assert [(x["id"], x["status"]) for x in recs] == [("0001", "ok"), ("0002", "error"), ("0003", "ok")]
    assert "stdin:2 is not UTF-8" in recs[1]["error"]
    assert (out / "0001.wav").exists() and (out / "0003.wav").exists()
    assert not list(out.glob("*.part"))


# --- row 3 / 11: a bad seed never shares a batch ------------------------------------------------------
def test_row3_row11_bad_seed_refused_per_request_before_batching(tiny_custom_voice):
    from voxcli.models import load_model

    from voxcli.engine.engine import Engine

    program = load_model(str(tiny_custom_voice))
    cfg = EngineConfig(executor="cpu", policy="full", max_prefill_batch=8, kv_pages=256, codec_slots=8)
    with Engine(program, cfg) as eng:
        for bad in (2**64, 2**63, -1, True, 1.5):
            with pytest.raises(InputError, match="seed must be a whole number"):
                eng.submit(SynthesisRequest(text="Hello.", seed=bad, fixed_frames=3))
        with pytest.raises(InputError, match="temperature"):
            eng.submit(SynthesisRequest(text="Hello.", sampling=SamplingParams(temperature=float("nan"))))
        good = [eng.submit(SynthesisRequest(text="Hello.", seed=s, fixed_frames=3))
                for s in (0, 7, 2**63 - 1)]
        assert all(s.wait().size > 0 for s in good)


def test_row3_bad_jsonl_seeds_fail_alone_in_a_batch(demo, tmp_path):
    lines = [{"id": "a", "text": "One."}, {"id": "big", "text": "Two.", "seed": 2**64},
             {"id": "b", "text": "Three.", "seed": 5}, {"id": "bool", "text": "Four.", "seed": True},
             {"id": "c", "text": "Five."}]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = tmp_path / "out"
    r = demo.run(["batch", "-m", "demo", *FAST, "-c", "8", str(src), "-o", str(out)])
    assert r.code == 1
    recs = {x["id"]: x for x in map(json.loads, (out / "manifest.jsonl").read_text().splitlines())}
    assert {k for k, v in recs.items() if v["status"] == "ok"} == {"a", "b", "c"}
    assert "seed must be a whole number" in recs["big"]["error"] and "in.jsonl:2" in recs["big"]["error"]


# --- row 4: duplicate ids keep the first record; a rerun regenerates nothing ----------------------
def test_row4_duplicate_ids_keep_first_record_and_resume(demo, tmp_path):
    src = tmp_path / "d.tsv"
    src.write_text("same\tfirst\nsame\tsecond\na/b\tthird\na_b\tfourth\n")
    out = tmp_path / "out"
    argv = ["batch", "-m", "demo", *FAST, "-c", "1", str(src), "-o", str(out)]
    r1 = demo.run(argv)
    assert "2 written, 2 failed, 0 already done" in r1.stderr, r1.stderr
    recs = {x["id"]: x for x in map(json.loads, (out / "manifest.jsonl").read_text().splitlines())}
    assert recs["same"]["status"] == "ok" and recs["same"]["file"] == "same.wav"
    assert recs["a_b"]["status"] == "ok" and recs["a_b"]["text"] == "third"
    assert "already used by" in recs["same@d.tsv:2"]["error"]
    r2 = demo.run(argv)
    assert "0 written, 2 failed, 2 already done" in r2.stderr, r2.stderr  # nothing regenerated


# --- row 5: close() with requests in flight returns everything ---------------------------------------
def test_row5_close_mid_run_releases_pools_and_clone_state(tiny_base_proj):
    from voxcli.models import load_model

    from voxcli.engine.engine import Engine

    wav = (0.1 * np.sin(np.arange(24000) / 10)).astype(np.float32)
    icl = dict(text="Hello there, how are you?", ref_audio=wav, ref_sample_rate=24000, ref_text="Hello.")
    xvec = SynthesisRequest(text="Good morning.", ref_audio=wav, ref_sample_rate=24000, fixed_frames=10,
                            sampling=SamplingParams(greedy=True))
    cfg = EngineConfig(executor="cpu", policy="full", kv_pages=512, codec_slots=4, max_running=4)

    fresh = load_model(str(tiny_base_proj))
    with Engine(fresh, cfg) as eng:
        want = eng.submit(xvec).wait()

    program = load_model(str(tiny_base_proj))
    eng = Engine(program, cfg)
    streams = [eng.submit(SynthesisRequest(**icl, fixed_frames=60, seed=i)) for i in range(4)]
    next(iter(streams[0]))  # every request prefilled (their reference codes are on their slots), mid-run
    eng.close()
    assert all(s.finished for s in streams)
    assert eng.scheduler.kv.free == cfg.kv_pages and eng.scheduler.slots.free == cfg.codec_slots
    assert not program.slot_refs, "the program kept per-slot voice-clone state after close()"
    with Engine(program, cfg) as again:
        got = again.submit(xvec).wait()
    assert got.shape == want.shape and float(np.abs(got - want).max()) == 0.0


# --- row 6: clear errors, before the model load --------------------------------------------------------
@pytest.mark.parametrize("argv, stdin, needle", [
    (["-", "-o", "{d}/x.wav"], b"Hi \xff\n", "standard input is not UTF-8 text"),
    (["Hi.", "-o", "{d}/x.wav", "--seed", str(2**64)], None, "--seed must be a whole number from 0 to"),
    (["Hi.", "-o", "{d}/x.wav", "--temperature", "nan"], None, "--temperature must be a finite number"),
    (["Hi.", "-o", "{d}"], None, "is a directory; give a file name"),
])
def test_row6_clear_one_line_errors_before_loading(demo, tmp_path, argv, stdin, needle):
    loaded = demo.engines
    r = demo.run(["say", "-m", "demo", "-q", *[a.replace("{d}", str(tmp_path)) for a in argv]], input=stdin)
    assert r.code == 2 and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert demo.engines == loaded  # refused before any model load
    assert not list(tmp_path.glob("*.wav*"))


# --- row 7 / 8: bench and profile on a plain install ---------------------------------------------------
def test_row7_bench_and_profile_without_matplotlib_say_how_to_get_plots(demo, tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else
                        real(name, *a))
    r = demo.run(["bench", "--executor", "sim", "--gpu", "h100", "--rates", "4", "--duration", "2",
                  "--warmup", "0", "--out", str(tmp_path / "b")])
    assert r.code == 0, r.stderr
    assert "pip install 'voxcli[plot]'" in r.stdout.decode()
    assert (tmp_path / "b" / "bench-qwen3-tts-1.7b-sim-h100.json").exists()
    r = demo.run(["profile", "--gpu", "h100", "--target-rate", "40", "--no-simulate",
                  "--out", str(tmp_path / "p")])
    assert r.code == 0, r.stderr
    assert "voxcli[plot]" in r.stdout.decode() and list((tmp_path / "p").glob("*.toml"))


# --- row 9: SIGTERM leaves no .part ----------------------------------------------------------------------
def test_row9_sigterm_leaves_no_part_file(demo, tmp_path):
    text = tmp_path / "big.txt"
    text.write_text(" ".join(f"Sentence number {i} is here." for i in range(200)))
    out = tmp_path / "x.wav"
    env = dict(os.environ, VOX_CACHE=os.environ["VOX_CACHE"])
    proc = subprocess.Popen([sys.executable, "-m", "voxcli.cli", "say", "-m", "demo", "-q", "--greedy", "-f",
                             str(text), "-o", str(out)], env=env, stderr=subprocess.PIPE, cwd=REPO)
    part = tmp_path / "x.wav.part"
    deadline = time.monotonic() + 120
    while not part.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert part.exists(), "the synthesis never started"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (proc.returncode, err)
    assert not part.exists() and not out.exists()
    assert b"interrupted" in err and b"Traceback" not in err


def test_row9_interrupt_while_opening_the_sink_leaves_no_part(tmp_path, monkeypatch):
    """The SIGTERM test above was flaky under load: the signal could land after the .part file was
    created but before the sink existed for anyone to abort. Open it, then interrupt at once."""
    import soundfile as sf

    from voxcli.audio import FileSink

    real = sf.SoundFile

    def opened_then_interrupted(path, *args, **kwargs):
        real(path, *args, **kwargs).close()  # the .part file now exists on disk
        raise KeyboardInterrupt

    monkeypatch.setattr(sf, "SoundFile", opened_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        FileSink(tmp_path / "x.wav", 24000, "wav")
    assert list(tmp_path.iterdir()) == []


# --- row 10: the bench keeps metrics, not PCM ---------------------------------------------------------
def test_row10_sim_bench_holds_no_pcm():
    from voxcli.bench.client import SimTarget, schedule
    from voxcli.bench.workloads import load_workload
    from voxcli.engine.engine import Engine
    from voxcli.sim.synthetic import SyntheticProgram

    cfg = EngineConfig(executor="sim", gpu="h100", policy="full")
    target = SimTarget(lambda: Engine(SyntheticProgram(), cfg), "full")
    arrivals = schedule(40.0, 5.0, 1, load_workload("libritts"), max_frames=100)
    assert len(arrivals) > 150
    tracemalloc.start()
    try:
        records = target.play(arrivals, 600)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        target.close()
    audio_s = sum(r.audio_seconds for r in records)
    assert audio_s > 500  # ~190 requests of up to 8 s: holding their PCM would take > 48 MB
    assert peak < 16e6, f"peak {peak / 1e6:.1f} MB while playing {audio_s:.0f} s of audio"


# --- row 12: the observer judges a decision at the time it was made ------------------------------------
def test_row12_observer_uses_the_decision_time():
    """A background chunk that was not urgent when `decide` ran but is by the (later) launch: the rule
    holds at decision time, so this is no violation; a Work without a decision time is one."""
    from support.engine_observer import Observer, Violation, _Req
    from voxcli.models.base import CodecItem

    from voxcli.engine.estimates import LatencyEstimator, default_profile
    from voxcli.engine.executors.base import Executor, Work
    from voxcli.engine.lanes import lane_layout

    class Clock(Executor):
        t = 0.07

        def now(self):
            return self.t

        def busy(self, lane):
            return False

        def launch(self, work):
            pass

        def wait(self, until):
            return []

    cfg = EngineConfig(executor="sim", policy="full", urgent_margin_s=0.1, chunk=ChunkSchedule())
    layout = lane_layout(cfg)
    obs = Observer(Clock(), cfg, LatencyEstimator(default_profile(), cfg, layout), 0.08)
    frames = [np.full(16, k, dtype=np.int64) for k in range(16)]
    first = cfg.chunk.size(0)
    obs.reqs[1] = _Req(arrival=0.0, prefilled_at=0.0, slot=0, frames=frames, sent=first, chunks=1,
                       t_first_audio=0.0 + 0.08 * 0)  # deadline of the next chunk: first * 80 ms
    obs.slot_owner[0] = 1
    deadline = obs._deadline(obs.reqs[1])
    n = cfg.chunk.size(1)
    item = CodecItem(slot=0, codes=np.stack(frames[first:first + n]), first=False, last=False)
    decided = deadline - cfg.urgent_margin_s - 0.01  # 10 ms of slack over the margin at decision time
    Clock.t = decided + 0.02  # urgent by the time launch reads the clock
    obs.launch(Work(lane="background", stage="codec", rows=[item], bucket=1, frames=n, decided_at=decided))
    obs.in_flight.clear()
    obs.reqs[1].chunk_in_flight = False
    with pytest.raises(Violation, match="decision time"):
        obs.launch(Work(lane="background", stage="codec", rows=[item], bucket=1, frames=n))


# --- row 13: tables are never cut --------------------------------------------------------------------
def test_row13_bench_tables_whole_when_not_a_terminal(demo, tmp_path):
    r = demo.run(["bench", "--executor", "sim", "--gpu", "h100", "--rates", "30,32", "--duration", "4",
                  "--warmup", "0", "--no-plot", "--out", str(tmp_path)])
    text = r.stdout.decode()
    assert r.code == 0 and "…" not in text, text
    assert "capacity @90%" in text and "audio<1s %" in text and "TTFA p50" in text


# --- row 14: the CPU bench picks its dilation from a measured real-time factor ---------------------------
def test_row14_dilation_and_rates_follow_the_measured_speed():
    from voxcli.bench.dilation import auto_rates, choose_dilation, sequential_capacity

    assert choose_dilation(0.1) == 1.0  # fast machine: the real SLO
    assert choose_dilation(0.7) == 2.5  # one stream gets a third of the machine
    assert choose_dilation(4.0) == 12.0  # slow machine: dilated until one stream keeps up easily
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            choose_dilation(bad)
    slow, fast = sequential_capacity(4.0, 3.0), sequential_capacity(0.4, 3.0)
    assert fast == pytest.approx(10 * slow)
    rates = auto_rates(slow)
    assert min(rates) < slow < max(rates) and rates == sorted(rates)
    src = (REPO / "benchmarks" / "bench_cpu.py").read_text()
    assert 'default="auto"' in src and "single-stream real-time factor" in src
