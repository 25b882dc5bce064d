"""Run a command and report its peak resident set size (wait4's ru_maxrss: the largest of the process
and each of its waited-for children); fail when it exits non-zero or its peak is over a bound.

usage: python scripts/peak_rss.py BOUND_MB LABEL -- COMMAND ...
"""

from __future__ import annotations

import os
import subprocess
import sys
import time


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        sys.stderr.write(__doc__)
        return 2
    bound_mb, label, cmd = float(argv[0]), argv[1], argv[3:]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd)
    _, status, usage = os.wait4(proc.pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    peak = usage.ru_maxrss / 1024
    ok = rc == 0 and peak <= bound_mb
    wall = time.monotonic() - t0
    print(f"{label}: exit {rc}, peak RSS {peak:.0f} MB (bound {bound_mb:.0f} MB), {wall:.0f} s"
          f"{'' if ok else '  FAILED'}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
