"""CFG throughput kept (decode throughput with CFG / without, at equal requests) with no sharing, with a
git revision's sharing (`--compare`, default main) and with this checkout's (models/dia/shared_cross.py),
side by side in one run:

    nice -n 10 .venv/bin/python -m benchmarks bench_cfg [--requests 16,64] [--frames 64] [--repeats 3]
                                                     [--compare main]

1. Sim (H100, Dia-1.6B, both shipped settings): one decode step's device time from the sim executor's
   own cost (SimExecutor.duration) for N requests without CFG and N CFG pairs charged 2 rows each
   (`off`), the revision's profile (its recipes/gpus/*.toml cfg_row / cfg_group, its keys: the text
   length) and this checkout's (its profile and keys), for two text mixes: benchmarks/bench_dia.py's two
   texts (2 lengths) and N distinct lengths.
2. CPU: the Dia program's decode stage (bench-size random weights, N requests of benchmarks/bench_dia.py's
   two texts in one batch, one torch thread, THREAD CPU time, prefill excluded), without CFG, CFG with
   `share_uncond` off, the revision's program (its models/ exported and imported as a second package)
   and this checkout's; see `cpu_rates` for how the shared machine's noise is kept out.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
from benchmarks.bench_dia import TEXTS, checkpoint  # noqa: E402 - after ROOT, as before

REV_PACKAGE = "vox_rev_models"  # the revision's models/ is imported under this name


def sim_step_ms(profile_name: str, n: int, cfg: bool, texts: list[str], share: str, rev: str) -> float:
    """`share`: "off" (every sequence a full row), "rev" (the revision's profile and per-length keys) or
    "this" (this checkout's profile and keys)."""
    from voxcli.models.base import Row, SynthesisRequest

    from voxcli.engine.executors.base import Work
    from voxcli.engine.lanes import LaneLayout
    from voxcli.sim.cost import CostProfile
    from voxcli.sim.executor import SimExecutor
    from voxcli.sim.synthetic import SyntheticProgram

    path = f"recipes/gpus/{profile_name}.toml"
    if share == "rev":
        profile = CostProfile.from_dict(tomllib.loads(git("show", f"{rev}:{path}")))
    else:
        profile = CostProfile.from_toml(ROOT / path)
    if share == "off":
        stages = dict(profile.stages, decode=replace(profile.stages["decode"], cfg_row=1.0, cfg_group=0.0))
        profile = replace(profile, stages=stages)
    program = SyntheticProgram.for_model("dia-1.6b")
    rows = []
    for i in range(n):
        text = texts[i % len(texts)]
        p = program.prepare(SynthesisRequest(text=text, cfg_scale=3.0 if cfg else 1.0, fixed_frames=64))
        if share == "rev" and p.uncond_key is not None:
            p = replace(p, uncond_key=len(text))  # the revision's key: pairs of one text length share
        rows.append(Row(i, p, [0]))
    width = sum(r.prompt.width for r in rows)
    layout = LaneLayout(policy="sync", lanes=("lm",), sms={"lm": None}, serialized=True)
    sim = SimExecutor(program, profile, layout)
    return sim.duration(Work(lane="lm", stage="decode", rows=rows, bucket=width)) * 1e3


def distinct_texts(n: int) -> list[str]:
    return ["[S1] " + "a" * (10 + 3 * i) + "." for i in range(n)]


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout


def import_rev_models(rev: str, into: Path):
    """The revision's models/ package (models/ imports nothing from voxcli), as REV_PACKAGE."""
    tar = into / "models.tar"
    subprocess.run(["git", "archive", "--format=tar", "-o", str(tar), rev, "models"], cwd=ROOT, check=True)
    with tarfile.open(tar) as t:
        t.extractall(into, filter="data")
    spec = importlib.util.spec_from_file_location(REV_PACKAGE, into / "models" / "__init__.py",
                                                  submodule_search_locations=[str(into / "models")])
    module = importlib.util.module_from_spec(spec)
    sys.modules[REV_PACKAGE] = module
    spec.loader.exec_module(module)
    return module


# name: (cfg_scale, share_uncond, the revision's program)
CONFIGS = {"plain": (1.0, True, False), "off": (3.0, False, False), "rev": (3.0, True, True),
           "this": (3.0, True, False)}


def make_rows(prog, n: int, frames: int, w: float, share: bool, rev: bool = False) -> list:
    """N prefilled rows of bench_dia's two texts (seeded sampling, fixed frames) in a fresh KV pool."""
    base = importlib.import_module(f"{REV_PACKAGE}.base" if rev else "voxcli.models.base")
    prog.share_uncond = share
    prompts = [prog.prepare(base.SynthesisRequest(text=TEXTS[i % 2], cfg_scale=w, seed=i,
                                                  fixed_frames=frames)) for i in range(n)]
    prog.init_kv(1, 16)
    need = [-(-prog.kv_tokens(p) // 16) for p in prompts]
    prog.init_kv(sum(need), 16)
    start, rows = 0, []
    for i, (p, k) in enumerate(zip(prompts, need, strict=True)):
        rows.append(base.Row(request_id=i, prompt=p, pages=list(range(start, start + k))))
        start += k
    prog.prefill(rows)
    return rows


def load_programs(configs: dict) -> dict:
    """One program (own KV pool) per configuration; the revision's from its own package."""
    from voxcli.models import load_model

    ckpt = str(checkpoint("bench"))
    out = {}
    for key, (_, _, rev) in configs.items():
        if rev:
            out[key] = importlib.import_module(f"{REV_PACKAGE}.dia.program").DiaProgram.load(ckpt)
        else:
            out[key] = load_model(ckpt)
    return out


def cpu_rates(n: int, frames: int, repeats: int, configs: dict) -> dict[str, float]:
    """Decode tokens per thread-CPU second for each configuration. Every decode step runs once per
    configuration in turn, so all see the same machine load at the same context length, and each step's
    time is its minimum over the repeats (a shared machine's load only ever adds time)."""
    programs = load_programs(configs)
    best: dict[str, list[float]] = {}
    for _ in range(repeats):
        rows = {key: make_rows(programs[key], n, frames, *configs[key]) for key in configs}
        done = False
        step = 0
        while not done:
            for key in configs:
                t0 = time.thread_time()
                outs = programs[key].decode(rows[key])
                dt = time.thread_time() - t0
                times = best.setdefault(key, [])
                if step < len(times):
                    times[step] = min(times[step], dt)
                else:
                    times.append(dt)
                done = all(o.done for o in outs)
            step += 1
    return {k: n * len(t) / sum(t) for k, t in best.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", default="16,64")
    ap.add_argument("--frames", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--compare", default="main", metavar="REV", help="the git revision measured beside")
    ap.add_argument("--skip-cpu", action="store_true")
    args = ap.parse_args()
    ns = [int(x) for x in args.requests.split(",")]
    rev = args.compare

    print("CFG throughput kept = decode throughput with CFG / without, equal requests (goal >= 90%)")
    print(f"1. sim, H100, Dia-1.6B: one decode step's device time (SimExecutor.duration); kept with no "
          f"sharing / {rev}'s / this checkout's")
    for prof in ("h100-dia-1.6b", "h100-optimistic-dia-1.6b"):
        for mix, texts in (("bench_dia's 2 texts", TEXTS), ("all lengths distinct", None)):
            for n in ns:
                t = texts or distinct_texts(n)
                plain = sim_step_ms(prof, n, False, t, "off", rev)
                ms = {s: sim_step_ms(prof, n, True, t, s, rev) for s in ("off", "rev", "this")}
                print(f"  {prof:26s} {mix:21s} n={n:3d}  no CFG {plain:6.3f} ms  CFG "
                      + " / ".join(f"{ms[s]:6.3f}" for s in ms) + " ms   kept "
                      + " / ".join(f"{plain / ms[s]:6.1%}" for s in ms))
    if args.skip_cpu:
        return
    torch.set_num_threads(1)
    print(f"2. CPU, Dia bench size, {args.frames} frames, 1 thread, thread-CPU time; decode tokens/s from "
          f"the per-step minimum over {args.repeats} repeats, the 4 configurations interleaved step by step")
    with tempfile.TemporaryDirectory() as tmp:
        import_rev_models(rev, Path(tmp))
        for n in ns:
            r = cpu_rates(n, args.frames, args.repeats, CONFIGS)
            kept = " / ".join(f"{r[k] / r['plain']:6.1%}" for k in ("off", "rev", "this"))
            print(f"  n={n:3d}  tokens/s no CFG {r['plain']:8.1f}  CFG no sharing / {rev} / this "
                  f"{r['off']:8.1f} / {r['rev']:8.1f} / {r['this']:8.1f}   kept {kept}")


if __name__ == "__main__":
    main()
