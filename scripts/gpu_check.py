#!/usr/bin/env python3
"""One-shot device check of the cuda backend (gpu-notes.md section 5) plus an engine smoke test.

    PYTHONUNBUFFERED=1 timeout 470 python scripts/gpu_check.py --out DIR

Every step writes one JSON line to DIR/gc.jsonl (name, pass, numbers) under its own try/except, so one
failure never hides the rest. Steps: 0 environment, 1 green-context partitions, 2 SM-id census (Triton,
optional), 3 matmul scaling, 4 concurrent partitions, 5 graphs per partition, 6 priority, 7 FlashInfer
(optional), 8 stage timing of the real-size 1.7B stand-ins (decode per bucket on the whole GPU and on
the backbone partition, codec per bucket on the codec partition and the whole GPU), 9 `vox bench` at two
rates for `--policy full` and `--policy sync2`. Writes the measured cost profile to
recipes/gpus/<gpu>.measured.toml (and DIR/), and prints one summary table (also DIR/summary.txt).
Exit 0 when steps 1-6 pass (or 3-6 pass in no_green_ctx mode, reported as such).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

RESULTS: list[dict[str, Any]] = []
STATE: dict[str, Any] = {}


def record(out: Path, name: str, ok: bool | None, **data: Any) -> dict[str, Any]:
    row = {"step": name, "pass": ok, **data}
    RESULTS.append(row)
    with open(out / "gc.jsonl", "a") as f:
        f.write(json.dumps(row, default=str) + "\n")
    print(
        f"[{name}] {'PASS' if ok else 'SKIP' if ok is None else 'FAIL'} "
        f"{json.dumps(data, default=str)[:400]}",
        flush=True,
    )
    return row


def step(out: Path, name: str, fn, deadline: float, need_s: float) -> None:  # noqa: ANN001
    if time.perf_counter() + need_s > deadline:
        record(out, name, None, reason=f"skipped: time budget (needs ~{need_s:.0f} s)")
        return
    t0 = time.perf_counter()
    try:
        ok, data = fn()
        record(out, name, ok, seconds=round(time.perf_counter() - t0, 1), **data)
    except Exception as e:
        record(
            out,
            name,
            False,
            seconds=round(time.perf_counter() - t0, 1),
            error=f"{type(e).__name__}: {e}",
            trace=traceback.format_exc()[-1500:],
        )


def timed(fn, stream, reps: int = 10, warm: int = 3) -> float:  # noqa: ANN001
    """Median milliseconds of `fn()` enqueued on `stream`, timed by events on that stream."""
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
    return statistics.median(times)


# ------------------------------------------------------------------------------------------------ 0
def s0_env() -> tuple[bool, dict]:
    props = torch.cuda.get_device_properties(0)
    data = {
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "device": props.name,
        "sms": props.multi_processor_count,
        "cc": f"{props.major}.{props.minor}",
        "memory_gib": round(props.total_memory / 2**30, 1),
        "torch_green_contexts": hasattr(torch.cuda, "green_contexts"),
    }
    try:
        import cuda.bindings
        import cuda.bindings.driver as drv

        data["cuda_bindings"] = getattr(cuda.bindings, "__version__", "?")
        data["driver_version"] = drv.cuDriverGetVersion()[1]
        data["priority_range"] = list(drv.cuCtxGetStreamPriorityRange()[1:])
    except Exception as e:
        data["cuda_bindings"] = f"unavailable: {e}"
    try:
        data["torch_priority_range"] = list(torch.cuda.Stream.priority_range())
    except Exception as e:
        data["torch_priority_range"] = f"n/a: {e}"
    STATE["props"] = props
    return True, data


# ------------------------------------------------------------------------------------------------ 1
def s1_partitions(lm: int, codec: int) -> tuple[bool, dict]:
    from voxcli.engine.partitions import build_partitions, check, load_driver

    data: dict[str, Any] = {}
    try:
        drv = load_driver()
        check(drv, drv.cuInit(0), "cuInit")
        dev = check(drv, drv.cuDeviceGet(0), "cuDeviceGet")
        sm = check(drv, drv.cuDeviceGetDevResource(dev, drv.CUdevResourceType.CU_DEV_RESOURCE_TYPE_SM), "res")
        data["smCount"] = int(sm.sm.smCount)
        for f in ("minSmPartitionSize", "smCoscheduledAlignment"):
            if hasattr(sm.sm, f):
                data[f] = int(getattr(sm.sm, f))
        r = drv.cuDevSmResourceSplitByCount(1, sm, 0, 100)
        data["probe_100"] = (
            int(r[1][0].sm.smCount) if r[0] == drv.CUresult.CUDA_SUCCESS else f"error {int(r[0])}"
        )
        r = drv.cuDevSmResourceSplitByCount(16, sm, 0, 8)
        if r[0] == drv.CUresult.CUDA_SUCCESS:
            data["probe_16x8_made"], data["probe_16x8_remainder"] = int(r[2]), int(r[3].sm.smCount)
    except Exception as e:
        data["probe_error"] = str(e)
    torch.zeros(1, device="cuda")  # the primary context must exist before green contexts
    streams = build_partitions(lm, codec, device_index=0, split=True)
    STATE["streams"] = streams
    data.update(
        green=streams.green,
        lm_sms=streams.lm_sms,
        codec_sms=streams.codec_sms,
        priorities=streams.priorities,
        reason=streams.reason,
        summary=streams.summary(),
    )
    if not streams.green:
        return False, {**data, "mode": "no_green_ctx"}
    plan = streams.plan
    return (streams.lm_sms, streams.codec_sms) == (plan.lm_sms, plan.codec_sms), data


def lane_streams() -> dict[str, Any]:
    s = STATE["streams"]
    return {"backbone": s.lm, "codec": s.codec, "full": s.device}


# ------------------------------------------------------------------------------------------------ 2
def s2_census() -> tuple[bool | None, dict]:
    try:
        import triton
        import triton.language as tl
    except Exception as e:
        return None, {"reason": f"triton unavailable: {e}"}

    @triton.jit
    def smid_kernel(out_ptr, spin: tl.constexpr):
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
    s = STATE["streams"]
    disjoint = not (sets["backbone"] & sets["codec"])
    ok = disjoint and counts == {"backbone": s.lm_sms, "codec": s.codec_sms, "full": s.total_sms}
    return ok, {"distinct_sms": counts, "backbone_codec_disjoint": disjoint}


# ------------------------------------------------------------------------------------------------ 3
def s3_matmul() -> tuple[bool, dict]:
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms = {name: timed(lambda: a @ b, st) for name, st in lane_streams().items()}
    STATE["matmul_ms"] = ms
    tflops = {k: round(2 * 8192**3 / (v / 1e3) / 1e12, 1) for k, v in ms.items()}
    rb, rc = ms["backbone"] / ms["full"], ms["codec"] / ms["full"]
    green = STATE["streams"].green
    ok = (1.2 <= rb <= 1.6 and 3.3 <= rc <= 5.2) if green else True
    return ok, {
        "ms": {k: round(v, 2) for k, v in ms.items()},
        "tflops": tflops,
        "ratio_backbone": round(rb, 3),
        "ratio_codec": round(rc, 3),
    }


# ------------------------------------------------------------------------------------------------ 4
def _concurrent(s1, s2, n: int = 20) -> tuple[float, float]:  # noqa: ANN001
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    ev = {}
    for name, st in (("one", s1), ("two", s2)):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ev[name] = (e0, e1, st)
    for e0, _, st in ev.values():
        e0.record(st)
    for _ in range(n):
        for _, (_, _, st) in ev.items():
            with torch.cuda.stream(st):
                a @ b
    for _, (_, e1, st) in ev.items():
        e1.record(st)
    torch.cuda.synchronize()
    return ev["one"][0].elapsed_time(ev["one"][1]) / n, ev["two"][0].elapsed_time(ev["two"][1]) / n


def s4_concurrent() -> tuple[bool, dict]:
    ls, solo = lane_streams(), STATE["matmul_ms"]
    tb, tc = _concurrent(ls["backbone"], ls["codec"])
    eff_b, eff_c = solo["backbone"] / tb, solo["codec"] / tc
    p1, p2 = torch.cuda.Stream(), torch.cuda.Stream()
    t1, t2 = _concurrent(p1, p2)
    # Interference of two unpartitioned lanes: per-call time when sharing vs alone on the whole GPU.
    STATE["interference"] = round(max(t1, t2) / solo["full"], 3)
    ok = (eff_b >= 0.85 and eff_c >= 0.85) if STATE["streams"].green else True
    return ok, {
        "backbone_ms": round(tb, 2),
        "codec_ms": round(tc, 2),
        "efficiency": [round(eff_b, 3), round(eff_c, 3)],
        "plain_streams_ms": [round(t1, 2), round(t2, 2)],
        "interference": STATE["interference"],
    }


# ------------------------------------------------------------------------------------------------ 5
def s5_graphs() -> tuple[bool, dict]:
    torch.manual_seed(0)
    ws = [torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) * 0.02 for _ in range(4)]

    def mlp(x):  # noqa: ANN001
        for w in ws:
            x = torch.relu(x @ w)
        return x

    data, ok, graphs = {}, True, {}
    for name, st in lane_streams().items():
        x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
        with torch.cuda.stream(st):
            for _ in range(3):
                mlp(x)
        st.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, pool=torch.cuda.graph_pool_handle(), stream=st):
            y = mlp(x)
        graphs[name] = (g, x, y)
        eager_ms = timed(lambda x=x: mlp(x), st, reps=20)
        replay_ms = timed(g.replay, st, reps=50)
        with torch.cuda.stream(st):
            ref = mlp(x)
            g.replay()
        st.synchronize()
        torch.testing.assert_close(y, ref)
        data[name] = {"eager_ms": round(eager_ms, 3), "replay_ms": round(replay_ms, 3)}
        ok &= replay_ms <= eager_ms * 1.05
    # Concurrent replays of all lanes' graphs (own pools): results must still be right.
    refs = {k: v[2].clone() for k, v in graphs.items()}
    for name, st in lane_streams().items():
        with torch.cuda.stream(st):
            graphs[name][0].replay()
    torch.cuda.synchronize()
    for k, (_, _, y) in graphs.items():
        torch.testing.assert_close(y, refs[k])
    # Cross replay: a backbone-captured matmul graph replayed on the codec stream keeps backbone speed.
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ls = lane_streams()
    cross = {}
    for cap, rep in (("backbone", "codec"), ("full", "codec")):
        with torch.cuda.stream(ls[cap]):
            a @ a
        ls[cap].synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=ls[cap]):
            a @ a
        cross[f"{cap}->{rep}"] = round(timed(g.replay, ls[rep]), 2)
    data["cross_replay_ms"] = cross
    data["matmul_ms"] = {k: round(v, 2) for k, v in STATE["matmul_ms"].items()}
    return ok, data


# ------------------------------------------------------------------------------------------------ 6
def s6_priority() -> tuple[bool, dict]:
    big = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    small = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    least, greatest = STATE["streams"].priorities["codec"], STATE["streams"].priorities["device"]
    filler = torch.cuda.Stream(priority=0)

    def latency(prio: int, graphed: bool) -> float:
        urgent = torch.cuda.Stream(priority=prio)
        g = None
        if graphed:
            with torch.cuda.stream(urgent):
                small @ small
            urgent.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, stream=urgent):
                small @ small
        runs = []
        for _ in range(5):
            torch.cuda.synchronize()
            with torch.cuda.stream(filler):
                for _ in range(30):
                    big @ big
            time.sleep(0.001)
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            with torch.cuda.stream(urgent):
                e0.record(urgent)
                g.replay() if g else small @ small
                e1.record(urgent)
            torch.cuda.synchronize()
            runs.append(e0.elapsed_time(e1))
        return statistics.median(runs)

    res = {
        "high": latency(greatest, False),
        "prio0": latency(least, False),
        "high_graph": latency(greatest, True),
        "prio0_graph": latency(least, True),
    }
    ok = (
        res["high"] <= 0.5 * res["prio0"]
        and res["high"] < 3.0
        and res["high_graph"] <= 0.5 * res["prio0_graph"]
    )
    return ok, {k: round(v, 3) for k, v in res.items()} | {"priorities": [least, greatest]}


# ------------------------------------------------------------------------------------------------ 7
def s7_flashinfer() -> tuple[bool | None, dict]:
    from voxcli.models import paged_attention as A

    if A.load_flashinfer() is None:
        return None, {"reason": f"flashinfer not importable: {A._flashinfer_error}"}
    st = STATE["streams"].lm
    hq, hkv, d, page = 16, 8, 128, 16
    kw = dict(
        num_qo_heads=hq,
        num_kv_heads=hkv,
        head_dim=d,
        page_size=page,
        max_pages_per_row=16,
        scratch_page=255,
        device="cuda",
        dtype=torch.bfloat16,
    )
    kv = torch.randn(256, 2, page, hkv, d, device="cuda", dtype=torch.bfloat16)
    q = torch.randn(8, hq, d, device="cuda", dtype=torch.bfloat16)
    fi, ref = A.make_decode_attention(8, backend="flashinfer", **kw), A.TorchPagedDecode(8, **kw)
    tables = [list(range(i * 16, i * 16 + 16)) for i in range(8)]
    with torch.cuda.stream(st):
        fi.plan(tables, [100 + 7 * i for i in range(8)])
        for _ in range(2):
            fi.run(q, kv)
    st.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=st):
        out = fi.run(q, kv)
    lens = [30 + 20 * i for i in range(8)]
    with torch.cuda.stream(st):
        fi.plan(tables, lens)
        ref.plan(tables, lens)
        g.replay()
        expect = ref.run(q, kv)
    st.synchronize()
    err = (out.float() - expect.float()).abs().max().item()
    return err < 2e-2, {"max_abs_err": err}


# ------------------------------------------------------------------------------------------------ 8
def s8_stages(decode_buckets: list[int], codec_buckets: list[int], context: int) -> tuple[bool, dict]:
    from gpu_check_model import REAL_1P7B, CodecModel, DecodeBench, DecodeStepModel

    torch.manual_seed(0)
    dt, dev = torch.bfloat16, torch.device("cuda")
    ls = lane_streams()
    data: dict[str, Any] = {"decode": {}, "codec": {}}
    with torch.no_grad():
        model = DecodeStepModel(REAL_1P7B).to(dev, dt).eval()
        data["decode_params_b"] = round(sum(p.numel() for p in model.parameters()) / 1e9, 3)
        for b in decode_buckets:
            row = {}
            for part in ("full", "backbone"):
                bench = DecodeBench(model, b, context, 16, dev, dt)
                st = ls[part]
                with torch.cuda.stream(st):
                    bench.plan()
                    for _ in range(2):
                        bench.run()
                st.synchronize()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, pool=torch.cuda.graph_pool_handle(), stream=st):
                    bench.run()

                def replay(bench=bench, g=g):  # noqa: ANN001
                    bench.plan()  # plan before every replay, outside capture, on the lane stream
                    g.replay()

                row[part] = round(timed(replay, st, reps=10, warm=2), 3)
                del g, bench
            data["decode"][b] = row
        prefill = {}
        for n in (64, 512):
            x = torch.randn(1, n, REAL_1P7B.hidden, device=dev, dtype=dt)
            prefill[n] = round(timed(lambda x=x, m=model: m.prefill(x), ls["full"], reps=5, warm=2), 3)
        data["prefill_ms"] = prefill
        model = None
        torch.cuda.empty_cache()
        codec = CodecModel(REAL_1P7B).to(dev, dt).eval()
        frames = 10
        for b in codec_buckets:
            row = {}
            for part in ("full", "codec"):
                codes = torch.randint(0, 2048, (b, 25 + frames, REAL_1P7B.groups), device=dev)
                st = ls[part]
                with torch.cuda.stream(st):
                    for _ in range(2):
                        codec(codes)
                st.synchronize()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, pool=torch.cuda.graph_pool_handle(), stream=st):
                    codec(codes)
                row[part] = round(timed(g.replay, st, reps=10, warm=2), 3)
                del g
            data["codec"][b] = row
    STATE["stages"] = data
    return True, data


def write_profile(out: Path) -> Path | None:
    st = STATE.get("stages")
    if not st:
        return None
    s = STATE["streams"]
    props = STATE["props"]
    name = next(
        (
            n
            for n in ("h200", "h100", "b200", "a100", "l40s", "l4")
            if n in props.name.lower().replace(" ", "")
        ),
        props.name.lower().split()[-1],
    )
    dec = sorted(st["decode"].items())
    cod = sorted(st["codec"].items())
    dec_speed = statistics.median(r["full"] / r["backbone"] for _, r in dec)
    cod_speed = statistics.median(r["full"] / r["codec"] for _, r in cod)
    p64, p512 = st["prefill_ms"][64], st["prefill_ms"][512]
    per_tok = max(0.0, (p512 - p64) / (512 - 64))

    # Partition speeds only mean something when green contexts really split the SMs.
    dec_split = cod_split = ""
    if s.green:
        dec_split = f"sm = [{s.lm_sms}, {s.total_sms}]\nspeed = [{min(1.0, dec_speed):.3f}, 1.0]\n"
        cod_split = f"sm = [{s.codec_sms}, {s.total_sms}]\nspeed = [{min(1.0, cod_speed):.3f}, 1.0]\n"

    def arr(xs):  # noqa: ANN001
        return "[" + ", ".join(f"{x:g}" for x in xs) + "]"

    text = f"""# Measured by scripts/gpu_check.py on {props.name} ({time.strftime("%Y-%m-%d")}).
# 1.7B stand-in stages, random bf16 weights, decode context {STATE["context"]} positions,
# codec chunks of 10 frames + 25 frames of left context.
# SM split: {s.summary()}
[gpu]
name = "{name}"
sms = {s.total_sms}
interference = {STATE.get("interference", 1.0)}

[stages.decode]
batch = {arr(b for b, _ in dec)}
ms = {arr(r["full"] for _, r in dec)}
{dec_split}
[stages.prefill]
batch = [1]
ms = [{max(0.01, p64 - 64 * per_tok):.3f}]
per_token_ms = {per_tok:.5f}

[stages.codec]
batch = {arr(b for b, _ in cod)}
ms = {arr(r["full"] for _, r in cod)}
frames_ref = 10
{cod_split}"""
    from voxcli.engine.cost import CostProfile

    path = ROOT / "recipes" / "gpus" / f"{name}.measured.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    CostProfile.from_toml(path)  # it must load with the engine's own reader
    (out / path.name).write_text(text)
    return path


# ------------------------------------------------------------------------------------------------ 9
# `python -m voxcli.cli` would import the module and exit silently (it has no __main__ guard), so the
# CLI's entry point is called explicitly: the same code path as the `vox` console script.
VOX = [sys.executable, "-c", "import sys; from voxcli.cli import main; sys.argv[0] = 'vox'; main()"]
BENCH_FLAGS = ("--model", "--executor", "--policy", "--rates", "--duration", "--warmup", "--timeout",
               "--no-stop", "--set", "--out")
BENCH_POLICIES = ("full", "sync2")
BENCH_WARMUP = 8  # concurrent warm-up requests per policy (graph capture and allocator warm-up)
BENCH_DRAIN_S = 60  # --timeout: wait at most this long for a rate's last requests
CKPT_BUILD_S = 90  # upper estimate of the random 1.7B build (bf16 draw + 3.8 GB write)


def bench_checkpoint(model: str | None) -> tuple[str, dict]:
    """`model`, or the random-weight 1.7B custom-voice checkpoint, built once per machine into the temp
    dir (never under --out: 3.8 GB would travel back with the results) and reused by later runs."""
    if model is not None:
        return model, {"model": model}
    from voxcli.models.qwen3_tts.tiny import build_tiny

    path = Path(os.environ.get("TMPDIR", "/tmp")) / "voxcli-gpu-check" / "ckpt-1.7b"
    if (path / "config.json").exists():  # build_tiny moves a finished build into place atomically
        return str(path), {"model": str(path), "build_s": 0.0, "reused": True}
    t0 = time.perf_counter()
    build_tiny(path, variant="custom_voice", size="1.7b")
    build_s = time.perf_counter() - t0
    gb = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e9
    print(f"[9_bench] built random 1.7B checkpoint in {build_s:.1f} s ({gb:.2f} GB): {path}", flush=True)
    return str(path), {"model": str(path), "build_s": round(build_s, 1), "size_gb": round(gb, 2)}


def bench_rows(data: dict) -> list[dict]:
    """Per (policy, rate) rows of one `vox bench` JSON (voxcli.bench.sweep.SweepResult.to_dict)."""
    rows = []
    for v in data["variants"]:
        for r in v["rates"]:
            rows.append({
                "policy": v["label"],
                "rate": r["rate"],
                "sent": r["sent"],
                "attainment": r["attainment"],
                "ttfa_p50_ms": None if r["ttfa_p50"] is None else round(r["ttfa_p50"] * 1e3, 1),
                "ttfa_p99_ms": None if r["ttfa_p99"] is None else round(r["ttfa_p99"] * 1e3, 1),
                "done_rps": round(r["completed_rps"], 2),
                "failed": r["failed"],
                "rejected": r["rejected"],
                "capacity90": v["capacity90"],
                "capacity99": v["capacity99"],
            })
    return rows


def s9_bench(
    out: Path, rates: list[float], seconds: int, model: str | None, lm_sms: int, codec_sms: int
) -> tuple[bool | None, dict]:
    help_out = subprocess.run(VOX + ["bench", "--help"], capture_output=True, text=True, cwd=ROOT,
                              timeout=120, env=dict(os.environ, COLUMNS="200"))
    missing = [f for f in BENCH_FLAGS if f not in help_out.stdout]
    if help_out.returncode != 0 or missing:
        return False, {"reason": f"`vox bench` is not available or lacks {missing}",
                       "stderr": (help_out.stdout + help_out.stderr)[-800:]}
    ckpt, info = bench_checkpoint(model)
    runs: dict[str, Any] = {}
    rows: list[dict] = []
    for policy in BENCH_POLICIES:
        # one process per policy (a crash in one keeps the other's numbers); both rates run back to back
        # against the same engine, as the sweep does against one server
        bench_dir = out / f"bench-{policy}"
        cmd = VOX + [
            "bench", "--model", ckpt, "--executor", "cuda", "--policy", policy,
            "--rates", ",".join(f"{r:g}" for r in rates), "--duration", str(seconds),
            "--warmup", str(BENCH_WARMUP), "--timeout", str(BENCH_DRAIN_S), "--no-stop",
            "--set", "device=cuda", "--set", "dtype=bfloat16",
            "--set", f"lm_sms={lm_sms}", "--set", f"codec_sms={codec_sms}",
            "--out", str(bench_dir),
        ]  # fmt: skip
        limit = len(rates) * (seconds + BENCH_DRAIN_S) + 180
        t0 = time.perf_counter()
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=limit)
            rc, tail = r.returncode, (r.stdout + r.stderr)[-1500:]
        except subprocess.TimeoutExpired as e:
            rc, tail = "timeout", f"killed after {limit} s: {str(e.stdout or '')[-800:]}"
        (out / f"bench-{policy}.log").write_text(str(tail))
        run: dict[str, Any] = {"rc": rc, "seconds": round(time.perf_counter() - t0, 1)}
        result = bench_dir / "bench-cuda.json"
        if rc == 0 and result.exists():
            got = bench_rows(json.loads(result.read_text()))
            rows += got
            run["rows"] = len(got)
        else:
            run["tail"] = tail[-600:]
        runs[policy] = run
    STATE["bench"] = rows
    ok = all(v["rc"] == 0 for v in runs.values()) and len(rows) == len(rates) * len(BENCH_POLICIES)
    return ok, {**info, "runs": runs, "rows": rows}


# ------------------------------------------------------------------------------------------------
def summary(out: Path, profile: Path | None) -> str:
    lines = ["", "gpu_check summary", "-" * 78]
    for r in RESULTS:
        status = "PASS" if r["pass"] else "SKIP" if r["pass"] is None else "FAIL"
        detail = r.get("error") or r.get("reason") or ""
        lines.append(f"{r['step']:<16} {status:<5} {str(detail)[:55]}")
    st = STATE.get("stages")
    if st:
        lines += ["", "decode step ms per bucket      whole GPU   backbone partition"]
        lines += [
            f"  bucket {b:<22} {r['full']:>9.2f}   {r['backbone']:>9.2f}" for b, r in st["decode"].items()
        ]
        lines += ["codec chunk ms per bucket      whole GPU   codec partition"]
        lines += [f"  bucket {b:<22} {r['full']:>9.2f}   {r['codec']:>9.2f}" for b, r in st["codec"].items()]
        lines.append(f"prefill ms (64 / 512 tokens): {st['prefill_ms']}")
    if "matmul_ms" in STATE:
        lines.append(f"8192^3 bf16 matmul ms: {STATE['matmul_ms']}")
    if STATE.get("bench"):
        lines += ["", "vox bench (random 1.7B, bf16)  req/s  sent  SLO %  TTFA p50  p99 ms  cap90  cap99"]
        for b in STATE["bench"]:
            lines.append(
                f"  {b['policy']:<28} {b['rate']:>5g} {b['sent']:>5} {b['attainment'] * 100:>6.1f} "
                f"{b['ttfa_p50_ms'] or float('nan'):>9.0f} {b['ttfa_p99_ms'] or float('nan'):>7.0f} "
                f"{b['capacity90']:>6g} {b['capacity99']:>6g}"
            )
    if profile:
        lines.append(f"measured profile: {profile.relative_to(ROOT)}")
    text = "\n".join(lines)
    (out / "summary.txt").write_text(text + "\n")
    return text


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output folder (gc.jsonl, summary.txt, measured profile)")
    ap.add_argument("--lm-sms", type=int, default=96)
    ap.add_argument("--codec-sms", type=int, default=32)
    ap.add_argument("--budget-s", type=float, default=470, help="skip steps that would end past this")
    ap.add_argument("--decode-buckets", default="1,8,32,64,128")
    ap.add_argument("--codec-buckets", default="1,2,4,8,16,32")
    ap.add_argument("--context", type=int, default=256, help="KV positions per row in the decode timing")
    ap.add_argument("--bench-rates", default="2,6")
    ap.add_argument("--bench-seconds", type=int, default=20, help="seconds of arrivals per rate")
    ap.add_argument("--model", default=None, help="checkpoint for the bench (default: build a random 1.7B)")
    ap.add_argument("--skip-bench", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    if out.suffix == ".jsonl":  # accept the gpu-notes spelling `--out $OUT/gc.jsonl`
        out = out.parent
    out.mkdir(parents=True, exist_ok=True)
    (out / "gc.jsonl").write_text("")
    if not torch.cuda.is_available():
        record(out, "0_env", False, error="torch sees no CUDA device; run this on a GPU machine")
        return 2
    deadline = time.perf_counter() + args.budget_s
    STATE["context"] = args.context
    step(out, "0_env", s0_env, deadline, 2)
    step(out, "1_partitions", lambda: s1_partitions(args.lm_sms, args.codec_sms), deadline, 5)
    if "streams" not in STATE:
        print("no lane streams could be built; stopping", file=sys.stderr)
        print(summary(out, None))
        return 1
    step(out, "2_sm_census", s2_census, deadline, 10)
    step(out, "3_matmul", s3_matmul, deadline, 20)
    if "matmul_ms" in STATE:
        step(out, "4_concurrent", s4_concurrent, deadline, 20)
    step(out, "5_graphs", s5_graphs, deadline, 30)
    step(out, "6_priority", s6_priority, deadline, 20)
    step(out, "7_flashinfer", s7_flashinfer, deadline, 60)
    step(
        out,
        "8_stages_1.7b",
        lambda: s8_stages(
            [int(x) for x in args.decode_buckets.split(",")],
            [int(x) for x in args.codec_buckets.split(",")],
            args.context,
        ),
        deadline,
        90,
    )
    profile = None
    try:
        profile = write_profile(out)
    except Exception as e:
        record(out, "profile", False, error=f"{type(e).__name__}: {e}")
    if not args.skip_bench:
        rates = [float(x) for x in args.bench_rates.split(",")]
        # per policy: model load + warm-up (~30 s), then each rate's arrivals and its drain
        need = (0 if args.model else CKPT_BUILD_S) + len(BENCH_POLICIES) * (
            30 + len(rates) * (args.bench_seconds + 20)
        )
        step(
            out,
            "9_bench",
            lambda: s9_bench(out, rates, args.bench_seconds, args.model, args.lm_sms, args.codec_sms),
            deadline,
            need,
        )
    print(summary(out, profile))
    by = {r["step"]: r["pass"] for r in RESULTS}
    core = ["3_matmul", "4_concurrent", "5_graphs", "6_priority"]
    green = STATE["streams"].green
    ok = all(by.get(s) for s in (["1_partitions"] + core)) if green else all(by.get(s) for s in core)
    if not green:
        print(f"mode no_green_ctx: {STATE['streams'].reason}")
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
