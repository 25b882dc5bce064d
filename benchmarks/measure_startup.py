"""Wall time of the commands a user runs before any synthesis (issue 23: each under 1.5 s on a quiet
machine): `vox --help`, `vox models`, `vox voices -m demo`, and a `vox batch` rerun with nothing to do.

Each command runs N times as a fresh subprocess; the script prints the best wall time and the child's CPU
time (user + sys) of that run. On a shared, loaded machine the CPU time is the better guide to what a
quiet machine's wall time would be. Setup (building the demo, the first batch run) is not timed.

usage: python -m benchmarks measure_startup [--repeat N] [--limit SECONDS]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd[2:])} failed ({p.returncode}): {p.stderr.decode()[-500:]}")
    return wall, cpu, p.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--limit", type=float, default=1.5)
    args = ap.parse_args()
    vox = [sys.executable, "-m", "voxcli"]
    with tempfile.TemporaryDirectory(prefix="vox-startup-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "VOX_CACHE": str(work / "cache")}
        lines = work / "lines.txt"
        lines.write_text("Hello there.\nHow are you today?\n")
        demo = ["-m", "demo", "-q", "--max-frames", "2"]
        setup = [vox + ["say", *demo, "Hi.", "-o", str(work / "hi.wav")],
                 vox + ["batch", *demo, str(lines), "-o", str(work / "out")]]
        for cmd in setup:  # builds the demo checkpoint and a finished batch (not timed)
            subprocess.run(cmd, env=env, cwd=work, check=True)
        commands = {
            "vox --help": ["--help"],
            "vox models": ["models"],
            "vox voices -m demo": ["voices", "-m", "demo"],
            "vox batch (rerun, nothing to do)": ["batch", "-m", "demo", str(lines), "-o", str(work / "out")],
        }
        print(f"best of {args.repeat} runs each (python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.1f})")
        print(f"{'command':36s} {'wall s':>7s} {'cpu s':>7s}  under {args.limit:g} s")
        worst = 0.0
        for name, argv in commands.items():
            runs = [timed(vox + argv, env, work) for _ in range(args.repeat)]
            wall, cpu, _ = min(runs)
            worst = max(worst, wall)
            print(f"{name:36s} {wall:7.2f} {cpu:7.2f}  {'yes' if wall < args.limit else 'NO'}")
    print(f"slowest best wall time: {worst:.2f} s")


if __name__ == "__main__":
    main()
