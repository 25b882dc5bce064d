"""What gpu_check measured so far: RESULTS (one row per step), STATE (what steps hand later ones: lane
streams, the program, figures), and their files DIR/gc.jsonl and DIR/summary.txt, rewritten after every
step so a crash or a kill keeps everything measured until then."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RESULTS: list[dict[str, Any]] = []
STATE: dict[str, Any] = {}
STICKY = ("illegal memory access", "device-side assert", "unspecified launch failure", "misaligned address",
          "an illegal instruction", "uncorrectable ECC", "CUDA error: unknown error")


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
