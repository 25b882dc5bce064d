"""gpu_check's CPU-testable parts (benchmarks/gpu/, run by scripts/gpu_check.py): the measured-profile
writer (on fake measurements) feeds the simulator,
`--plan` lists the steps with their budgets in seconds, and the device-side random program builder
keeps up with the program's constructor (built tiny on the CPU)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from voxcli.bench.measured import Measurements, write_profile
from voxcli.bench.sweep import SweepSpec, Variant, sweep_variant
from voxcli.bench.targets import sim_target
from voxcli.bench.workloads import load_workload
from voxcli.config import ChunkSchedule, EngineConfig

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # benchmarks/ (the device check's package): a folder of the checkout
from benchmarks.gpu.steps import Step  # noqa: E402


def _fake(**kw) -> Measurements:
    # Shaped like an H200 run: decode barely slows on fewer SMs at batch 1, a lot at batch 256.
    args = dict(
        gpu="fakegpu", device_name="Fake H200", sms_total=132, batch_decode=[1, 64, 256],
        decode={32: [4.0, 14.0, 45.0], 96: [3.5, 9.5, 26.0], 132: [3.4, 8.3, 23.0]},
        batch_codec=[1, 8, 32], codec={16: [6.0, 35.0, 140.0], 32: [4.0, 19.0, 72.0], 132: [1.9, 5.7, 19.0]},
        codec_frames=10, context=64, prefill_ms={64: 4.0, 512: 7.0}, interference=1.4,
        context_ms={64: {1: 3.4, 256: 23.0}, 1024: {1: 3.9, 256: 31.0}}, notes=["fake numbers"])
    args.update(kw)
    return Measurements(**args)


def test_measured_profile_is_read_back_with_the_numbers_it_was_given(tmp_path):
    path, prof = write_profile(_fake(), tmp_path)
    assert path.name == "fakegpu.measured.toml"
    assert prof.sms == 132 and prof.interference == pytest.approx(1.4)
    assert prof.latency("decode", 64) * 1e3 == pytest.approx(8.3)
    assert prof.latency("decode", 256, sms=96) * 1e3 == pytest.approx(26.0)
    assert prof.latency("codec", 8, sms=32) * 1e3 == pytest.approx(19.0)
    assert prof.latency("codec", 1, frames=20) * 1e3 == pytest.approx(prof.latency("codec", 2) * 1e3)
    # prefill: the line through (64, 4 ms) and (512, 7 ms)
    assert prof.latency("prefill", 1, tokens=512) * 1e3 == pytest.approx(7.0, abs=1e-3)
    assert "[stages.decode.context_ms]" in path.read_text()


def test_the_simulator_runs_on_a_measured_profile(tmp_path):
    _, prof = write_profile(_fake(), tmp_path)
    cfg = EngineConfig(executor="sim", gpu="fakegpu.measured", policy="full",
                       chunk=ChunkSchedule(first=10, steady=10))
    spec = SweepSpec(rates=[4.0], duration_s=2.0, warmup=2)
    sw = sweep_variant(sim_target(cfg, Variant.policy("full"), profile=prof), Variant.policy("full"), spec,
                       load_workload("seed-tts"))
    assert sw.results[0].sent > 0 and sw.results[0].attainment > 0.5


@pytest.mark.parametrize(("change", "match"), [
    (dict(decode={96: [3.5, 9.5, 26.0], 132: [3.4, 8.3, 23.0]}), "at least 3 SM counts"),
    (dict(codec={16: [6.0, 35.0, 140.0], 32: [4.0, 19.0, 72.0], 64: [2, 8, 30.0]}), "whole-device"),
    (dict(interference=0.8), "interference"),
    (dict(decode={32: [4.0, 14.0], 96: [3.5, 9.5, 26.0], 132: [3.4, 8.3, 23.0]}), "one positive time"),
])
def test_incomplete_measurements_write_no_profile(tmp_path, change, match):
    with pytest.raises(ValueError, match=match):
        write_profile(_fake(**change), tmp_path)
    assert not list(tmp_path.glob("*.toml"))


@pytest.mark.parametrize("quick", [True, False])
def test_plan_prints_every_step_with_its_budget_on_a_cpu_machine(quick, tmp_path):
    cmd = [sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--plan", "--out", str(tmp_path)]
    r = subprocess.run(cmd + (["--quick"] if quick else []), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.strip()]
    steps = [ln for ln in lines if ln.lstrip()[:2].isdigit()]
    assert len(steps) >= (7 if quick else 9)
    assert all(ln.rstrip().endswith("s") for ln in steps)
    for name in ("partitions", "graphs", "priority", "flashinfer", "engine_graphs", "bench"):
        assert any(name in ln for ln in steps), name
    total = int(lines[-1].split()[-2])
    if quick:
        assert total <= 240 and "calibrate" not in r.stdout
    else:
        assert "calibrate" in r.stdout
    assert not list(tmp_path.iterdir())  # --plan runs nothing


def test_random_program_builds_the_real_program_class_where_it_runs():
    import torch
    from voxcli.models.base import Row, SynthesisRequest

    from benchmarks.gpu.random_program import random_program

    p = random_program("tiny", "cpu", torch.float32)
    p.init_kv(32, 4)
    p.init_codec_slots(2)
    prompt = p.prepare(SynthesisRequest(text="Hello world.", voice="serena", fixed_frames=2))
    row = Row(1, prompt, list(range(16)))
    p.prefill([row])
    out = p.decode([row])
    assert out[0].frame is not None and out[0].frame.shape == (16,)


def _gpu_check():
    """The runner with empty results (RESULTS and STATE are the package's module state)."""
    from benchmarks.gpu import results, runner

    results.RESULTS.clear()
    results.STATE.clear()
    return runner


def test_runner_writes_results_after_every_step_and_only_checks_gate(tmp_path):
    gc = _gpu_check()
    seen = []

    def runner(name, ok):  # noqa: ANN001, ANN202
        def run(args):  # noqa: ANN001, ANN202
            # what an earlier step recorded is already on disk when the next one starts
            seen.append((name, (tmp_path / "gc.jsonl").read_text().count("\n")))
            if ok == "raise":
                raise RuntimeError("a measurement broke")
            return ok, {"value": 1}
        return run

    steps = [Step("a", 1, True, True, ""), Step("b", 1, True, False, ""),
             Step("c", 1, True, False, ""), Step("too_long", 10_000, True, True, "")]
    runners = {"a": runner("a", True), "b": runner("b", False), "c": runner("c", "raise")}
    rc = gc.run_steps(steps, runners, None, tmp_path, time.perf_counter() + 60, healthy=lambda: None,
                      needs_streams=False)
    assert rc == 0  # the failed measurements (b, c) never gate; the over-budget check is skipped
    assert seen == [("a", 0), ("b", 1), ("c", 2)]
    rows = [json.loads(x) for x in (tmp_path / "gc.jsonl").read_text().splitlines()]
    assert [(r["step"], r["pass"]) for r in rows] == [
        ("a", True), ("b", False), ("c", False), ("too_long", None)]
    assert "skipped" in rows[-1]["reason"] and "too_long" in (tmp_path / "summary.txt").read_text()


def test_runner_stops_at_a_sticky_cuda_error_and_a_failed_check_gates(tmp_path):
    gc = _gpu_check()
    ran = []

    def boom(args):  # noqa: ANN001, ANN202
        ran.append("boom")
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    steps = [Step("boom", 1, True, True, ""), Step("after", 1, True, True, "")]
    rc = gc.run_steps(steps, {"boom": boom, "after": lambda a: ran.append("after") or (True, {})}, None,
                      tmp_path, time.perf_counter() + 60, healthy=lambda: "CUDA error: illegal memory access",
                      needs_streams=False)
    assert rc == 1 and ran == ["boom"]  # nothing runs on a poisoned context
    assert "sticky CUDA error after boom" in (tmp_path / "summary.txt").read_text()
    gc.RESULTS.clear()
    rc = gc.run_steps([Step("check", 1, True, True, "")], {"check": lambda a: (False, {})}, None, tmp_path,
                      time.perf_counter() + 60, healthy=lambda: None, needs_streams=False)
    assert rc == 1
