"""Memory: over long runs (issue 12: does `vox` keep only metrics, or every waveform?) and while loading
a real-size checkpoint (issue 23: no second copy of the weights).

    python -m benchmarks measure_memory                  # the two long-run measurements (1, 2)
    python -m benchmarks measure_memory --only bench     # or: --only batch
    python -m benchmarks measure_memory --only load --checkpoint DIR [--dtype float32 --dtype bfloat16]

1. `vox bench --executor sim --gpu h100 --rates 150 --duration 90 --no-stop` (13,500 requests): the
   peak resident set size of that process (wait4's ru_maxrss). Target: under 600 MB.
2. `vox batch -m demo` of 1,000 short lines: resident set size sampled every 0.2 s; growth = the peak
   after the first 100 items are done minus the resident size when they were. Target: under 50 MB.

3. `--only load`: a fresh Python process loads DIR (`voxcli.models.load_model` on the cpu, then the
   codec it reads on first use) in each --dtype; its peak resident set size (wait4's ru_maxrss) against
   the size of what it loaded (every parameter of talker and codec in that dtype) plus the process's
   resident size before loading (Python, torch, voxcli imported). Target: peak - baseline <= 1.3 x weights.

Each runs as its own `vox` process (the console script of this environment), nice'd, so the numbers are
that command's alone. Prints one line per measurement and exits non-zero when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VOX = [sys.executable, "-m", "voxcli.cli"]


def _rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def bench_peak(rate: float, duration: float, work: Path) -> tuple[float, float]:
    """(peak RSS MB, wall s) of a sim bench run."""
    cmd = ["nice", "-n", "10", *VOX, "bench", "--executor", "sim", "--gpu", "h100",
           "--rates", f"{rate:g}", "--duration", f"{duration:g}", "--no-stop", "--warmup", "0", "--no-plot",
           "--out", str(work / "bench")]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"bench failed: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
    return usage.ru_maxrss / 1024, time.monotonic() - t0


def batch_growth(lines: int, work: Path, max_frames: int) -> tuple[float, float, float, float]:
    """(RSS MB after 100 items, peak RSS MB after that, growth MB, wall s) of a demo batch run."""
    src = work / "lines.txt"
    src.write_text("".join(f"Line number {i} of the memory check.\n" for i in range(lines)))
    out = work / "batch"
    cmd = ["nice", "-n", "10", *VOX, "batch", "-m", "demo", "-q", "--greedy", "--max-frames", str(max_frames),
           "-c", "8", str(src), "-o", str(out)]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = peak = None
    while proc.poll() is None:
        rss = _rss_kb(proc.pid)
        done = len(list(out.glob("*.wav"))) if out.exists() else 0
        if rss is not None and done >= 100:
            base = rss if base is None else base
            peak = max(peak or 0, rss)
        time.sleep(0.2)
    if proc.returncode != 0:
        raise SystemExit(f"batch failed: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
    if base is None or peak is None:
        raise SystemExit("the batch finished before 100 items could be sampled; give more --lines")
    return base / 1024, peak / 1024, (peak - base) / 1024, time.monotonic() - t0


_LOAD = """
import json, resource, sys
import torch  # noqa: F401 - part of the baseline, not of loading
from voxcli.models import describe_model, load_model
describe_model(sys.argv[1])  # the family's code imported (its config read), no weights: part of the baseline
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
p = load_model(sys.argv[1], "cpu", sys.argv[2])
codec = p.codec_model
size = sum(t.numel() * t.element_size() for m in (p.weights, codec) for t in m.state_dict().values())
print(json.dumps({"baseline_kb": base, "weights_bytes": size}))
"""


def load_peak(checkpoint: str, dtype: str) -> tuple[float, float, float, float]:
    """(baseline MB, peak MB, weights MB, wall s) of one process loading `checkpoint` in `dtype`."""
    import json

    t0 = time.monotonic()
    proc = subprocess.Popen(["nice", "-n", "10", sys.executable, "-c", _LOAD, checkpoint, dtype],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    out = proc.stdout.read().decode() if proc.stdout else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"loading failed: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
    info = json.loads(out.strip().splitlines()[-1])
    return (info["baseline_kb"] / 1024, usage.ru_maxrss / 1024, info["weights_bytes"] / 2**20,
            time.monotonic() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=("bench", "batch", "load"))
    ap.add_argument("--checkpoint", help="--only load: the checkpoint directory")
    ap.add_argument("--dtype", action="append", choices=("float32", "bfloat16"),
                    help="--only load: dtype(s) to load in (default: both, one process each)")
    ap.add_argument("--rate", type=float, default=150.0)
    ap.add_argument("--duration", type=float, default=90.0)
    ap.add_argument("--lines", type=int, default=1000)
    ap.add_argument("--max-frames", type=int, default=12)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="vox-mem-"))
    ok = True
    try:
        if args.only == "load":
            if not args.checkpoint:
                raise SystemExit("--only load needs --checkpoint DIR (scripts/make_tiny.py DIR --size 0.6b)")
            for dtype in args.dtype or ["float32", "bfloat16"]:
                base, peak, weights, wall = load_peak(args.checkpoint, dtype)
                ratio = (peak - base) / weights
                ok &= ratio <= 1.3
                print(f"load {args.checkpoint} as {dtype}: weights {weights:.0f} MB, peak RSS {peak:.0f} MB"
                      f" ({base:.0f} MB before): peak - before = {ratio:.2f} x weights (target <= 1.3) "
                      f"in {wall:.0f} s")
            return 0 if ok else 1
        if args.only in (None, "bench"):
            peak, wall = bench_peak(args.rate, args.duration, work)
            ok &= peak < 600
            print(f"bench sim {args.rate:g} req/s x {args.duration:g} s: peak RSS {peak:.0f} MB "
                  f"(target < 600) in {wall:.0f} s")
        if args.only in (None, "batch"):
            base, peak, growth, wall = batch_growth(args.lines, work, args.max_frames)
            ok &= growth < 50
            print(f"batch demo {args.lines} lines (--max-frames {args.max_frames}, -c 8): RSS {base:.0f} MB "
                  f"after 100 items, peak {peak:.0f} MB after, growth {growth:.1f} MB (target < 50) "
                  f"in {wall:.0f} s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
