"""gpu_check's bench step: the engine on the random 1.7B program at two rates, policy full and sync2, one
subprocess per policy (`python -m benchmarks.gpu --bench-child POLICY`), each capped by the time left."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.gpu.cuda_util import engine_config
from benchmarks.gpu.results import STATE
from benchmarks.gpu.steps import BENCH_FULL, BENCH_QUICK

ROOT = Path(__file__).resolve().parents[2]


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
        cmd = [sys.executable, "-m", "benchmarks.gpu", "--bench-child", policy, "--out", str(res),
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

    from benchmarks.gpu.random_program import random_program
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
