"""`python -m benchmarks NAME [ARGS]`: run the benchmark module benchmarks/NAME.py with ARGS, as if it were
the program (`python -m benchmarks NAME --help` prints its usage); `python -m benchmarks` lists them all
with the first line of each one's docstring. Run from the checkout's root (the modules import each other
as `benchmarks.NAME`)."""

from __future__ import annotations

import ast
import runpy
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def available() -> dict[str, str]:
    """Module name -> the first line of its docstring, for every runnable benchmark (gpu: the device
    check, a package of its own)."""
    out = {}
    for path in sorted(HERE.glob("*.py")):
        if path.stem.startswith("_"):
            continue
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        out[path.stem] = doc.strip().splitlines()[0] if doc.strip() else ""
    out["gpu"] = "the device check (scripts/gpu_check.py): checks that gate, measurements for the simulator"
    return out


def main() -> int:
    names = available()
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help", "list"):
        print("usage: python -m benchmarks NAME [ARGS]   (NAME --help: its usage)\n")
        width = max(map(len, names))
        for name, line in names.items():
            print(f"  {name:{width}s}  {line}")
        return 0
    name = sys.argv[1]
    if name not in names:
        print(f"python -m benchmarks: no benchmark {name!r}; run `python -m benchmarks` for the list",
              file=sys.stderr)
        return 2
    sys.argv = [f"benchmarks/{name}", *sys.argv[2:]]
    runpy.run_module(f"benchmarks.{name}", run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
