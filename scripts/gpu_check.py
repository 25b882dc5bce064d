#!/usr/bin/env python3
"""One short device run of the cuda backend: checks that gate, measurements that teach the simulator.

    PYTHONUNBUFFERED=1 python scripts/gpu_check.py --quick --out DIR     # <= 4 min on an H200
    PYTHONUNBUFFERED=1 python scripts/gpu_check.py --out DIR             # + SM census + calibration
    python scripts/gpu_check.py --plan [--quick]                         # the steps and budgets; CPU, seconds

Built for a scarce GPU lease: everything is built on the device (the model program is the real
Qwen3-TTS program with random real-size 1.7B weights drawn there, `gpu_check_model.random_program`; no
checkpoint is written or read), each step runs under a watchdog (`faulthandler.dump_traceback_later`:
a hung step dumps every thread's stack to DIR/watchdog.txt and ends the process), the run stops at the
first sticky CUDA error, DIR/gc.jsonl and DIR/summary.txt are rewritten after every step, a step is
skipped when its budget no longer fits the deadline, and every subprocess is capped by the time left
and logs to a file as it runs. Only checks gate the exit code (env, partitions, graphs, FlashInfer,
engine graphs); measurements (priority, calibration, bench) never do.

Steps (see STEPS; --plan prints them with budgets):
  env            versions, SMs, stream priority range
  partitions     the device's SM granularity, split probes, the lane streams (green contexts)
  sm_census      (full) which SMs each lane stream's kernels land on (Triton %smid)
  graphs         graphs captured and replayed on each lane stream, concurrently and across streams
  flashinfer     FlashInfer decode at head_dim 128: prime, capture, re-plan, replay vs the torch path
  engine_graphs  the engine's decode and codec graphs (CudaExecutor over the random 1.7B program) at 3
                 buckets on the lane streams: a real batch through prefill, graphed decode, graphed codec;
                 replay time per graph
  priority       urgent codec graph latency while decode and background codec graphs keep their lanes
                 busy; the same graph replayed on a least-priority stream; a graph captured on a
                 least-priority stream replayed on the urgent one
  calibrate      (full) per-batch ms of the graphed stages at >= 3 SM counts (8-SM groups of one split
                 combined) + the whole device, context 64 (and 1024 for two buckets), interference of real
                 decode + codec graphs on two plain streams, prefill: recipes/gpus/<gpu>.measured.toml
                 (`vox bench --executor sim --gpu <gpu>.measured` reads it)
  bench          the engine (random 1.7B, bf16) at two rates for policy full and sync2, one subprocess
                 per policy
Exit 0 when every gating step that ran passed, 1 otherwise (or on a sticky CUDA error), 2 without CUDA.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

RESULTS: list[dict[str, Any]] = []
STATE: dict[str, Any] = {}
STICKY = ("illegal memory access", "device-side assert", "unspecified launch failure", "misaligned address",
          "an illegal instruction", "uncorrectable ECC", "CUDA error: unknown error")


@dataclass(frozen=True)
class Step:
    name: str
    budget_s: float  # skipped when less than this is left before the deadline; the watchdog allows 2x + 20 s
    quick: bool  # part of --quick
    gates: bool  # a FAIL makes the exit code 1 (checks); measurements never gate
    what: str


STEPS: tuple[Step, ...] = (
    Step("env", 5, True, True, "versions, SMs, stream priority range"),
    Step("partitions", 10, True, True, "device SM granularity, split probes, green-context lane streams"),
    Step("sm_census", 15, False, False, "SMs each lane stream's kernels land on (Triton %smid)"),
    Step("graphs", 15, True, True, "graphs on each lane stream, concurrent replays, cross-stream replay"),
    Step("flashinfer", 20, True, True, "FlashInfer, head_dim 128: prime, capture, re-plan, replay vs torch"),
    Step("engine_graphs", 60, True, True, "random 1.7B on the device; CudaExecutor decode + codec graphs at "
         "3 buckets, a real batch through them, replay ms"),
    Step("priority", 20, True, False, "urgent graph latency with both background lanes busy; cross-stream"),
    Step("calibrate", 150, False, False, "stage ms at >=3 SM counts, interference, context 64/1024 -> "
         "recipes/gpus/<gpu>.measured.toml"),
    Step("bench", 100, True, False, "engine bench, policy full vs sync2, two rates (subprocess per policy)"),
)
QUICK = {"decode": (1, 16, 128), "background": (1, 8, 32), "urgent": (1, 4, 8)}
BENCH_QUICK = dict(rates=(2.0, 6.0), seconds=6, warmup=4)
BENCH_FULL = dict(rates=(2.0, 6.0), seconds=20, warmup=8)


def plan_steps(quick: bool) -> list[Step]:
    steps = [s for s in STEPS if s.quick or not quick]
    if not quick:
        steps = [Step(s.name, 200, s.quick, s.gates, s.what) if s.name == "bench" else s for s in steps]
    return steps


def print_plan(quick: bool) -> None:
    steps = plan_steps(quick)
    mode = "quick" if quick else "full"
    print(f"gpu_check plan ({mode}): {len(steps)} steps; a step is skipped when its budget no longer fits")
    for i, s in enumerate(steps):
        kind = "check" if s.gates else "measure"
        print(f"  {i:02d} {s.name:<14} {kind:<8} {s.what}  {s.budget_s:.0f} s")
    print(f"total {sum(s.budget_s for s in steps):.0f} s")


# ------------------------------------------------------------------------------------------------ records
def record(out: Path, name: str, ok: bool | None, **data: Any) -> None:
    RESULTS.append({"step": name, "pass": ok, **data})
    status = "PASS" if ok else "SKIP" if ok is None else "FAIL"
    print(f"[{name}] {status} {json.dumps(data, default=str)[:600]}", flush=True)
    flush(out)


def flush(out: Path) -> None:
    """gc.jsonl and summary.txt as of now (a later crash or kill leaves everything measured so far)."""
    tmp = out / "gc.jsonl.tmp"
    tmp.write_text("".join(json.dumps(r, default=str) + "\n" for r in RESULTS))
    tmp.replace(out / "gc.jsonl")
    (out / "summary.txt").write_text(summary() + "\n")


def summary() -> str:
    lines = ["gpu_check summary", "-" * 78]
    for r in RESULTS:
        status = "PASS" if r["pass"] else "SKIP" if r["pass"] is None else "FAIL"
        detail = r.get("error") or r.get("reason") or ""
        lines.append(f"{r['step']:<14} {status:<5} {r.get('seconds', ''):>6} s  {str(detail)[:48]}")
    if STATE.get("streams") is not None:
        lines.append(f"lanes: {STATE['streams'].summary()}")
    eg = STATE.get("engine_graphs")
    if eg:
        lines.append("graph replay ms (engine, lane streams): " + json.dumps(eg))
    pr = STATE.get("priority")
    if pr:
        lines.append("urgent codec graph ms: " + json.dumps(pr))
    if STATE.get("profile"):
        lines.append(f"measured profile: {STATE['profile']}")
    for b in STATE.get("bench", []):
        lines.append(f"bench {b['policy']:<6} {b['rate']:>5g} req/s  sent {b['sent']:>4}  SLO "
                     f"{b['attainment'] * 100:5.1f}%  TTFA p50 {b['ttfa_p50_ms']} p99 {b['ttfa_p99_ms']} ms  "
                     f"cap90 {b['capacity90']}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ helpers
def timed(fn, stream, reps: int = 10, warm: int = 2) -> float:  # noqa: ANN001
    """Median ms of `fn()` enqueued on `stream`, timed by events on that stream."""
    import torch

    with torch.cuda.stream(stream):
        for _ in range(warm):
            fn()
    stream.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(stream):
            a.record(stream)
            fn()
            b.record(stream)
        b.synchronize()
        times.append(a.elapsed_time(b))
    return round(statistics.median(times), 4)


def capture(gs: Any, stream: Any, pool: Any = None, warm: int = 2) -> Any:
    """A graph of the stage `gs` on `stream`, primed and warmed up there first (as the executor does)."""
    import torch

    with torch.cuda.stream(stream):
        if gs.prime is not None:
            gs.prime()
        for _ in range(warm):
            gs.run()
    stream.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, pool=pool, stream=stream):
        gs.run()
    stream.synchronize()
    return g


def cuda_healthy() -> str | None:
    """None when the context still works, else the error (a sticky error poisons every later call)."""
    import torch

    try:
        torch.cuda.synchronize()
        x = torch.ones(8, device="cuda")
        if float((x + 1).sum().item()) != 16.0:
            return "arithmetic check failed"
        return None
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def engine_config(policy: str, quick: bool, lm_sms: int, codec_sms: int) -> Any:
    from voxcli.config import load_recipe

    # 2048 pages of 64 = 131k KV positions (14 GiB at 1.7B): ample for 3 buckets and a short bench, and
    # the parent's pool and a bench child's fit the device together.
    sets = [f"policy={policy}", "executor=cuda", "device=cuda", "dtype=bfloat16", f"lm_sms={lm_sms}",
            f"codec_sms={codec_sms}", "kv_pages=2048"]
    if quick:
        sets += [f"decode_buckets={list(QUICK['decode'])}", f"background_buckets={list(QUICK['background'])}",
                 f"urgent_buckets={list(QUICK['urgent'])}"]
    return load_recipe("qwen3-tts-1.7b", sets)


def lane_streams() -> dict[str, Any]:
    s = STATE["streams"]
    return {"backbone": s.lm, "codec": s.codec, "device": s.device}


# ------------------------------------------------------------------------------------------------ steps
def s_env(args: Any) -> tuple[bool, dict]:
    import torch

    props = torch.cuda.get_device_properties(0)
    data = {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "device": props.name,
            "sms": props.multi_processor_count, "cc": f"{props.major}.{props.minor}",
            "memory_gib": round(props.total_memory / 2**30, 1)}
    try:
        import cuda.bindings
        import cuda.bindings.driver as drv

        data["cuda_bindings"] = getattr(cuda.bindings, "__version__", "?")
        data["driver_version"] = drv.cuDriverGetVersion()[1]
    except Exception as e:
        data["cuda_bindings"] = f"unavailable: {e}"
    data["torch_priority_range"] = list(torch.cuda.Stream.priority_range())
    try:
        from voxcli.models.paged_attention import load_flashinfer

        fi = load_flashinfer()
        data["flashinfer"] = getattr(fi, "__version__", "?") if fi is not None else "absent"
    except Exception as e:
        data["flashinfer"] = f"error: {e}"
    STATE["props"] = props
    return True, data


def s_partitions(args: Any) -> tuple[bool | None, dict]:
    import torch

    from voxcli.engine.partitions import (
        build_partitions,
        check,
        device_granularity,
        load_driver,
        valid_layouts,
    )

    data: dict[str, Any] = {}
    torch.zeros(1, device="cuda")  # the primary context must exist before green contexts
    try:
        drv = load_driver()
        data["granularity"] = device_granularity(drv, 0)
        dev = check(drv, drv.cuDeviceGet(0), "cuDeviceGet")
        sm = check(drv, drv.cuDeviceGetDevResource(dev, drv.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM), "res")
        data["smCount"] = int(sm.sm.smCount)
        r = drv.cuDevSmResourceSplitByCount(16, sm, 0, 8)
        if r[0] == drv.CUresult.CUDA_SUCCESS:
            data["probe_16x8_made"], data["probe_16x8_remainder"] = int(r[2]), int(r[3].sm.smCount)
        else:
            data["probe_16x8"] = f"error {int(r[0])}"
    except Exception as e:
        data["probe_error"] = f"{type(e).__name__}: {e}"
    streams = build_partitions(args.lm_sms, args.codec_sms, device_index=0, split=True)
    STATE["streams"] = streams
    g = streams.granularity
    data.update(green=streams.green, lm_sms=streams.lm_sms, codec_sms=streams.codec_sms,
                priorities=streams.priorities, reason=streams.reason, granularity_used=g,
                granularity_source=streams.granularity_source,
                valid_layouts=valid_layouts(streams.total_sms, *g)[:8] if all(g) else None)
    if not streams.green:
        return None, {**data, "reason": f"no green contexts: {streams.reason}"}
    return (streams.lm_sms, streams.codec_sms) == (streams.plan.lm_sms, streams.plan.codec_sms), data


def s_sm_census(args: Any) -> tuple[bool | None, dict]:
    import torch

    try:
        import triton
        import triton.language as tl
    except Exception as e:
        return None, {"reason": f"triton unavailable: {e}"}

    @triton.jit
    def smid_kernel(out_ptr, spin: tl.constexpr):  # noqa: ANN001, ANN202
        pid = tl.program_id(0)
        sm = tl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=tl.int32, is_pure=False, pack=1)
        acc = pid.to(tl.float32)
        for _ in range(spin):
            acc = acc * 1.0000001 + 1.0
        tl.store(out_ptr + pid, sm + (acc < 0).to(tl.int32))

    n = 4 * STATE["props"].multi_processor_count
    sets = {}
    for name, stream in lane_streams().items():
        out = torch.full((n,), -1, dtype=torch.int32, device="cuda")
        with torch.cuda.stream(stream):
            smid_kernel[(n,)](out, spin=20000)
        stream.synchronize()
        sets[name] = set(out.tolist())
    counts = {k: len(v) for k, v in sets.items()}
    return None, {"distinct_sms": counts, "backbone_codec_disjoint": not (sets["backbone"] & sets["codec"])}


def s_graphs(args: Any) -> tuple[bool, dict]:
    import torch

    torch.manual_seed(0)
    ws = [torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(4)]

    def mlp(x):  # noqa: ANN001, ANN202
        for w in ws:
            x = torch.relu(x @ w)
        return x

    data, graphs = {}, {}
    for name, st in lane_streams().items():
        x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
        with torch.cuda.stream(st):
            for _ in range(2):
                mlp(x)
        st.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=torch.cuda.graph_pool_handle(), stream=st):
            y = mlp(x)
        graphs[name] = (g, x, y)
        with torch.cuda.stream(st):
            ref = mlp(x)
            g.replay()
        st.synchronize()
        torch.testing.assert_close(y, ref)
        data[name] = {"eager_ms": timed(lambda x=x: mlp(x), st), "replay_ms": timed(g.replay, st)}
    refs = {k: v[2].clone() for k, v in graphs.items()}
    for name, st in lane_streams().items():  # all lanes at once, own pools: still right
        with torch.cuda.stream(st):
            graphs[name][0].replay()
    torch.cuda.synchronize()
    for k, (_, _, y) in graphs.items():
        torch.testing.assert_close(y, refs[k])
    # A graph keeps the partition it was captured on: a backbone graph replayed on the codec stream.
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ls, cross = lane_streams(), {}
    pairs = (("backbone", "backbone"), ("backbone", "codec"), ("codec", "codec"), ("device", "codec"))
    for cap, rep in pairs:
        with torch.cuda.stream(ls[cap]):
            a @ a
        ls[cap].synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=ls[cap]):
            a @ a
        cross[f"{cap}->{rep}"] = timed(g.replay, ls[rep])
    data["matmul8192_cross_replay_ms"] = cross
    return True, data


def s_flashinfer(args: Any) -> tuple[bool | None, dict]:
    import torch
    from voxcli.models import paged_attention as A

    if A.load_flashinfer() is None:
        return None, {"reason": f"flashinfer not importable: {A._flashinfer_error}"}
    kw = dict(num_qo_heads=16, num_kv_heads=8, head_dim=128, page_size=16, max_pages_per_row=64,
              scratch_page=1023, device="cuda", dtype=torch.bfloat16)
    st = STATE["streams"].lm
    lane = A.LaneAttention("check", backend="flashinfer", **kw)
    attn, ref = lane[8], A.TorchPagedDecode(8, **kw)
    kv = torch.randn(1024, 2, 16, 8, 128, device="cuda", dtype=torch.bfloat16)
    q = torch.randn(8, 16, 128, device="cuda", dtype=torch.bfloat16)
    with torch.cuda.stream(st):
        attn.prime()
        for _ in range(2):
            attn.run(q, kv)
    st.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=st):
        out = attn.run(q, kv)
    errs = []
    for lens in ([30 + 20 * i for i in range(8)], [1000 - 90 * i for i in range(8)]):
        tables = [list(range(i * 64, i * 64 + 64)) for i in range(8)]
        with torch.cuda.stream(st):
            attn.plan(tables, lens)
            ref.plan(tables, lens)
            g.replay()
            want = ref.run(q, kv)
        st.synchronize()
        errs.append((out.float() - want.float()).abs().max().item())
    return max(errs) < 2e-2, {"max_abs_err": errs, "workspace_mib": round(lane.workspace.numel() / 2**20)}


def s_engine_graphs(args: Any) -> tuple[bool, dict]:
    import numpy as np
    import torch
    from gpu_check_model import random_program
    from voxcli.models.base import CodecItem, Row, SynthesisRequest

    from voxcli.engine.engine import resource_limits
    from voxcli.engine.executors.base import Work
    from voxcli.engine.executors.cuda import CudaExecutor

    t0 = time.perf_counter()
    program = random_program("1.7b", "cuda", torch.bfloat16)
    torch.cuda.synchronize()
    build_s = round(time.perf_counter() - t0, 1)
    cfg = engine_config("full", True, args.lm_sms, args.codec_sms)
    if cfg.chunk is None:  # as the engine does: no recipe schedule -> the model's own
        cfg = cfg.replace(chunk=program.spec.chunk)
    program.set_limits(resource_limits(cfg))
    program.init_kv(cfg.kv_pages, cfg.kv_page_size)
    program.init_codec_slots(cfg.codec_slots)
    t0 = time.perf_counter()
    ex = CudaExecutor(program, cfg, streams=STATE["streams"])
    capture_s = round(time.perf_counter() - t0, 1)
    STATE.update(program=program, executor=ex, config=cfg)
    # A real batch: prefill (eager, whole device), graphed decode steps, one graphed codec chunk each.
    rows, page = [], 0
    for i in range(3):
        prompt = program.prepare(SynthesisRequest(text="Hello there. This is a check.", voice="serena",
                                                  seed=i, fixed_frames=12))
        need = -(-program.kv_tokens(prompt) // cfg.kv_page_size)
        rows.append(Row(request_id=i, prompt=prompt, pages=list(range(page, page + need)), slot=i))
        page += need

    def run(work: Work) -> list[Any]:
        ex.launch(work)
        (done,) = ex.wait(None)
        if done.error is not None:
            raise done.error
        return done.result

    run(Work("lm", "prefill", rows, bucket=len(rows), tokens=sum(r.prompt.length for r in rows)))
    frames: list[list[np.ndarray]] = [[] for _ in rows]
    for _ in range(6):
        outs = run(Work("lm", "decode", rows, bucket=cfg.decode_buckets[1]))
        for i, o in enumerate(outs):
            frames[i].append(o.frame)
    codes = np.stack(frames[0])
    if codes.shape != (6, 16) or codes.min() < 0 or codes.max() >= 2048:
        return False, {"error": f"decode frames out of range: {codes.shape}, {codes.min()}..{codes.max()}"}
    items = [CodecItem(slot=i, codes=np.stack(f), first=True, last=False) for i, f in enumerate(frames)]
    wavs = run(Work("background", "codec", items, bucket=cfg.background_buckets[-1]))
    finite = all(np.isfinite(w).all() and w.size == 6 * program.spec.samples_per_frame for w in wavs)
    # Replay time of every captured graph on its own lane stream (inputs: the last loaded batch).
    replay = {}
    plan = ex.plan
    for lane in plan.lanes:
        for stage, buckets in plan.stages[lane]:
            for b in buckets:
                cap = ex.graphs.get((plan.partition[lane], stage, b))
                if cap is not None:
                    replay[f"{lane}/{stage}/{b}"] = timed(cap.graph.replay, ex.stream_of[lane], reps=5)
    STATE["engine_graphs"] = replay
    return bool(finite), {"build_s": build_s, "capture_s": capture_s, "graphs": len(ex.graphs),
                          "eager_keys": ex.eager_keys, "replay_ms": replay}


def s_priority(args: Any) -> tuple[bool | None, dict]:
    import torch

    ex = STATE.get("executor")
    if ex is None:
        return None, {"reason": "engine_graphs did not run"}
    plan, streams = ex.plan, STATE["streams"]
    big_decode = ex.graphs[(plan.partition["lm"], "decode", plan.largest("lm", "decode"))]
    big_codec = ex.graphs[(plan.partition["background"], "codec", plan.largest("background", "codec"))]
    urgent = ex.graphs[(plan.partition["urgent"], "codec", 1)]
    least, greatest = streams.priorities["codec"], streams.priorities["device"]
    low = torch.cuda.Stream(priority=least)
    # The same urgent stage captured on a least-priority whole-device stream, for the cross test.
    low_graph = capture(urgent.stage, low)

    def latency(graph: Any, stream: Any, busy: bool) -> float:
        runs = []
        for _ in range(5):
            torch.cuda.synchronize()
            if busy:
                with torch.cuda.stream(ex.stream_of["lm"]):
                    for _ in range(8):
                        big_decode.graph.replay()
                with torch.cuda.stream(ex.stream_of["background"]):
                    for _ in range(8):
                        big_codec.graph.replay()
                time.sleep(0.002)  # let both lanes fill the device first
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(stream):
                e0.record(stream)
                graph.replay()
                e1.record(stream)
            torch.cuda.synchronize()
            runs.append(e0.elapsed_time(e1))
        return round(statistics.median(runs), 3)

    res = {"idle": latency(urgent.graph, streams.device, False),
           "busy_urgent_stream": latency(urgent.graph, streams.device, True),
           "busy_replayed_on_low": latency(urgent.graph, low, True),
           "busy_low_capture_on_urgent": latency(low_graph, streams.device, True),
           "priorities": [least, greatest]}
    res["priority_gain"] = round(res["busy_replayed_on_low"] / max(res["busy_urgent_stream"], 1e-6), 2)
    STATE["priority"] = res
    return None if not streams.green else True, res


def _green_stream(drv: Any, groups: list[Any], priority: int, created: list) -> Any:
    """A torch stream on a green context made of `groups` (outputs of one split)."""
    import torch

    from voxcli.engine.partitions import _handle_int, check

    desc = check(drv, drv.cuDevResourceGenerateDesc(groups, len(groups)), "cuDevResourceGenerateDesc")
    dev = check(drv, drv.cuDeviceGet(0), "cuDeviceGet")
    ctx = check(drv, drv.cuGreenCtxCreate(desc, dev, drv.CUgreenCtxCreate_flags.CU_GREEN_CTX_DEFAULT_STREAM),
                "cuGreenCtxCreate")
    created.append(("ctx", ctx))
    s = check(drv, drv.cuGreenCtxStreamCreate(ctx, drv.CUstream_flags.CU_STREAM_NON_BLOCKING, priority),
              "cuGreenCtxStreamCreate")
    created.append(("stream", s))
    return torch.cuda.ExternalStream(_handle_int(s), device=0)


def s_calibrate(args: Any, out: Path) -> tuple[bool | None, dict]:
    import torch
    from voxcli.models.base import Row, SynthesisRequest
    from voxcli.models.qwen3_tts.graph_stages import CodecGraphStage, DecodeGraphStage

    from voxcli.bench.measured import Measurements, write_profile
    from voxcli.engine.partitions import _destroy, check, load_driver

    program, streams = STATE.get("program"), STATE["streams"]
    if program is None:
        return None, {"reason": "engine_graphs did not run (no program on the device)"}
    total = streams.total_sms
    drv = load_driver()
    dev = check(drv, drv.cuDeviceGet(0), "cuDeviceGet")
    sm = check(drv, drv.cuDeviceGetDevResource(dev, drv.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM), "res")
    g = max(streams.granularity) if all(streams.granularity) else 8
    groups, made, _rest = check(drv, drv.cuDevSmResourceSplitByCount(total // g, sm, 0, g), "split")
    groups = list(groups)[:int(made)]
    counts = [c for c in (16, 32, 64, 96) if c // g <= len(groups)]
    created: list = []
    stage_streams = {c: _green_stream(drv, groups[:c // g], 0, created) for c in counts}
    stage_streams[total] = torch.cuda.Stream()
    dec_b, cod_b, ctx = [1, 8, 64, 256], [1, 8, 32], 64
    ps, dev_t = program.page_size, torch.device("cuda", 0)

    def set_context(gs: Any, bucket: int, context: int) -> None:
        per = -(-(context + 1) // ps)
        tables = [list(range(i * per, (i + 1) * per)) for i in range(bucket)]
        gs.attn.plan(tables, [context + 1] * bucket)

    decode: dict[int, list[float]] = {c: [] for c in stage_streams}
    codec: dict[int, list[float]] = {c: [] for c in stage_streams}
    context_ms: dict[int, dict[int, float]] = {64: {}, 1024: {}}
    try:
        for b in dec_b:
            gs = DecodeGraphStage(program, b, dev_t, program.attention_backend, lane="calibrate")
            for c, st in stage_streams.items():
                graph = capture(gs, st)
                with torch.cuda.stream(st):
                    set_context(gs, b, ctx)
                decode[c].append(timed(graph.replay, st, reps=5))
                if c == total and b in (8, 64):
                    context_ms[64][b] = decode[c][-1]
                    with torch.cuda.stream(st):
                        set_context(gs, b, 1024)
                    context_ms[1024][b] = timed(graph.replay, st, reps=5)
                del graph
        for b in cod_b:
            gs = CodecGraphStage(program, b, dev_t, program.limits.max_chunk_frames)
            for c, st in stage_streams.items():
                graph = capture(gs, st)
                codec[c].append(timed(graph.replay, st, reps=5))
                del graph
        # Interference: real decode (64 rows) and codec (8 chunks) graphs on two plain streams at once.
        a, bstream = torch.cuda.Stream(), torch.cuda.Stream()
        dgs = DecodeGraphStage(program, 64, dev_t, program.attention_backend, lane="calibrate")
        cgs = CodecGraphStage(program, 8, dev_t, program.limits.max_chunk_frames)
        dg, cg = capture(dgs, a), capture(cgs, bstream)
        with torch.cuda.stream(a):
            set_context(dgs, 64, ctx)
        solo_d, solo_c = timed(dg.replay, a), timed(cg.replay, bstream)
        torch.cuda.synchronize()
        n = 20
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        ev[0].record(a)
        ev[2].record(bstream)
        for _ in range(n):
            with torch.cuda.stream(a):
                dg.replay()
            with torch.cuda.stream(bstream):
                cg.replay()
        ev[1].record(a)
        ev[3].record(bstream)
        torch.cuda.synchronize()
        both_d, both_c = ev[0].elapsed_time(ev[1]) / n, ev[2].elapsed_time(ev[3]) / n
        interference = max(1.0, (both_d / solo_d + both_c / solo_c) / 2)
        # Prefill: eager, one prompt of each length, on the whole device.
        prefill = {}
        for sentences in (1, 12):
            text = " ".join(["Hello there, this is a long enough sentence."] * sentences)
            prompt = program.prepare(SynthesisRequest(text=text, voice="serena", fixed_frames=4))
            pages = list(range(-(-program.kv_tokens(prompt) // ps)))
            prefill[prompt.length] = timed(
                lambda p=prompt, pg=pages: program.prefill([Row(request_id=0, prompt=p, pages=pg, slot=0)]),
                stage_streams[total], reps=3)
    finally:
        torch.cuda.synchronize()
        _destroy(drv, created)
    props = STATE["props"]
    name = next((n for n in ("h200", "h100", "b200", "a100", "l40s", "l4")
                 if n in props.name.lower().replace(" ", "")), props.name.lower().split()[-1])
    m = Measurements(gpu=name, device_name=props.name, sms_total=total, batch_decode=dec_b, decode=decode,
                     batch_codec=cod_b, codec=codec, codec_frames=program.limits.max_chunk_frames,
                     context=ctx, prefill_ms=prefill, interference=round(interference, 4),
                     context_ms=context_ms,
                     notes=[f"SM counts {counts} from one split into groups of {g}",
                            f"lanes: {streams.summary()}",
                            f"interference: decode {solo_d:.3f} -> {both_d:.3f} ms, codec {solo_c:.3f} -> "
                            f"{both_c:.3f} ms on two plain streams"])
    path, _ = write_profile(m, ROOT / "recipes" / "gpus")
    (out / path.name).write_text(path.read_text())
    STATE["profile"] = str(path.relative_to(ROOT))
    return None, {"profile": STATE["profile"], "sm_counts": counts + [total], "decode_ms": decode,
                  "codec_ms": codec, "context_ms": context_ms, "interference": m.interference,
                  "prefill_ms": prefill}


def bench_rows(data: dict) -> list[dict]:
    rows = []
    for v in data["variants"]:
        for r in v["rates"]:
            rows.append({"policy": v["label"], "rate": r["rate"], "sent": r["sent"],
                         "attainment": r["attainment"],
                         "ttfa_p50_ms": None if r["ttfa_p50"] is None else round(r["ttfa_p50"] * 1e3, 1),
                         "ttfa_p99_ms": None if r["ttfa_p99"] is None else round(r["ttfa_p99"] * 1e3, 1),
                         "failed": r["failed"], "rejected": r["rejected"], "capacity90": v["capacity90"]})
    return rows


def s_bench(args: Any, out: Path, deadline: float) -> tuple[bool | None, dict]:
    """One subprocess per policy (a crash keeps the other's numbers), each capped by the time left."""
    b = BENCH_QUICK if args.quick else BENCH_FULL
    ex = STATE.pop("executor", None)  # the children get the whole device: free the parent's program
    if ex is not None:
        ex.close()
    STATE.pop("program", None)
    import torch

    torch.cuda.empty_cache()
    runs, rows = {}, []
    for policy in ("full", "sync2"):
        left = deadline - time.perf_counter() - 3
        if left < 30:
            runs[policy] = {"rc": "skipped", "reason": f"{left:.0f} s left"}
            continue
        res = out / f"bench-{policy}.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--bench-child", policy, "--out", str(res),
               "--lm-sms", str(args.lm_sms), "--codec-sms", str(args.codec_sms)]
        cmd += ["--quick"] if args.quick else []
        log = out / f"bench-{policy}.log"
        t0 = time.perf_counter()
        with open(log, "w") as f:
            p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT,
                                 env=dict(os.environ, PYTHONUNBUFFERED="1"))
            limit = min(left / (2 if policy == "full" else 1), (b["seconds"] + 30) * len(b["rates"]) + 90)
            try:
                rc: Any = p.wait(timeout=max(10.0, limit))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                rc = f"killed after {limit:.0f} s"
        run: dict[str, Any] = {"rc": rc, "seconds": round(time.perf_counter() - t0, 1)}
        if rc == 0 and res.exists():
            got = bench_rows(json.loads(res.read_text()))
            rows += got
            run["rows"] = len(got)
        else:
            run["tail"] = log.read_text()[-600:]
        runs[policy] = run
    STATE["bench"] = rows
    return None, {"runs": runs, "rows": rows}


def bench_child(args: Any) -> int:
    """Inside the subprocess: the engine on the random 1.7B program, one policy, two rates."""
    import torch
    from gpu_check_model import random_program

    from voxcli.bench.report import write_json
    from voxcli.bench.sweep import SweepResult, SweepSpec, Variant, sweep_variant
    from voxcli.bench.targets import engine_target
    from voxcli.bench.workloads import load_workload

    b = BENCH_QUICK if args.quick else BENCH_FULL
    cfg = engine_config(args.bench_child, args.quick, args.lm_sms, args.codec_sms)
    program = random_program("1.7b", "cuda", torch.bfloat16)
    spec = SweepSpec(rates=list(b["rates"]), duration_s=b["seconds"], warmup=b["warmup"], timeout_s=30,
                     stop_rule=False)
    variant = Variant.policy(args.bench_child)
    sw = sweep_variant(engine_target(cfg, variant, program=program), variant, spec, load_workload("seed-tts"),
                       progress=lambda s, r: print(f"{variant.label} {r.rate:g} req/s: {r.attainment:.3f}",
                                                   flush=True))
    write_json(SweepResult(spec, [sw]), Path(args.out))
    return 0


# ------------------------------------------------------------------------------------------------ main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="output folder (gc.jsonl, summary.txt, logs, measured profile)")
    ap.add_argument("--quick", action="store_true", help="the <= 4 min subset (see --plan --quick)")
    ap.add_argument("--plan", action="store_true", help="print the steps and their budgets, run nothing")
    ap.add_argument("--lm-sms", type=int, default=96)
    ap.add_argument("--codec-sms", type=int, default=32)
    ap.add_argument("--budget-s", type=float, default=None, help="deadline (default: the plan's total)")
    ap.add_argument("--bench-child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.plan:
        print_plan(args.quick)
        return 0
    if args.bench_child:
        return bench_child(args)
    if not args.out:
        ap.error("--out is required (unless --plan)")
    out = Path(args.out)
    if out.suffix == ".jsonl":  # accept `--out $OUT/gc.jsonl`
        out = out.parent
    out.mkdir(parents=True, exist_ok=True)
    steps = plan_steps(args.quick)
    budget = args.budget_s or sum(s.budget_s for s in steps)
    deadline = time.perf_counter() + budget
    import torch

    if not torch.cuda.is_available():
        record(out, "env", False, error="torch sees no CUDA device; run this on a GPU machine")
        return 2
    runners = {"env": s_env, "partitions": s_partitions, "sm_census": s_sm_census, "graphs": s_graphs,
               "flashinfer": s_flashinfer, "engine_graphs": s_engine_graphs, "priority": s_priority,
               "calibrate": lambda a: s_calibrate(a, out), "bench": lambda a: s_bench(a, out, deadline)}
    return run_steps(steps, runners, args, out, deadline)


def run_steps(steps: list[Step], runners: dict[str, Any], args: Any, out: Path, deadline: float,
              healthy: Any = cuda_healthy, needs_streams: bool = True) -> int:
    """Run `steps` in order under the deadline and a per-step watchdog; the exit code (see the module
    docstring). `runners[name](args) -> (ok, data)`; `healthy()` -> None or the sticky error."""
    watchdog = open(out / "watchdog.txt", "w")  # noqa: SIM115 - lives as long as the process
    flush(out)  # an empty gc.jsonl / summary.txt from the start: a kill at any point leaves both
    for s in steps:
        left = deadline - time.perf_counter()
        if left < s.budget_s:
            record(out, s.name, None, reason=f"skipped: {left:.0f} s left, budget {s.budget_s:.0f} s")
            continue
        if needs_streams and s.name not in ("env", "partitions") and "streams" not in STATE:
            record(out, s.name, None, reason="no lane streams")
            continue
        faulthandler.dump_traceback_later(2 * s.budget_s + 20, exit=True, file=watchdog)
        t0 = time.perf_counter()
        try:
            ok, data = runners[s.name](args)
            record(out, s.name, ok, seconds=round(time.perf_counter() - t0, 1), gates=s.gates, **data)
        except Exception as e:
            record(out, s.name, False, seconds=round(time.perf_counter() - t0, 1), gates=s.gates,
                   error=f"{type(e).__name__}: {e}", trace=traceback.format_exc()[-1500:])
            sick = healthy()
            if sick is not None or any(k in str(e) for k in STICKY):
                record(out, "stopped", False, reason=f"sticky CUDA error after {s.name}: {sick or e}")
                print(summary())
                return 1
        finally:
            faulthandler.cancel_dump_traceback_later()
    print(summary())
    failed = [r["step"] for r in RESULTS if r.get("gates") and r["pass"] is False]
    return 1 if failed else 0

if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
