"""CosyVoice 3 end to end: the engine at 16 concurrent requests vs upstream's own sequential inference,
side by side in one run, on the same bench-size random checkpoint (models/cosyvoice3/tiny.py "bench":
Qwen2 256 x 4, DiT 256 x 6, HiFT 128).

    nice -n 10 .venv/bin/python -m benchmarks bench_cosyvoice [--requests 16] [--upstream-requests 4]

Both sides decode greedily (argmax in place of ras_sampling: the same tokens, so the same audio per
request) with the checkpoint's saved speaker and upstream's streamed output (stream=True), one torch
thread each:
  engine    the cpu executor, policy full, all requests submitted at once
  upstream  CosyVoice3.inference_zero_shot(stream=True) one request after another, in the CosyVoice
            oracle venv (VOX_COSYVOICE_ORACLE_PYTHON), as upstream's own example serves them; its model
            load is not counted
Figures: audio seconds per wall second and per CPU second (process CPU time: this machine is shared,
the CPU column is the one to read there), and the load average at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# short texts: a random LM never stops by itself, so each runs to upstream's max_len (20 x its text tokens)
TEXTS = ("Hello there.", "Good morning.", "Thank you.", "See you soon.")


def oracle_python() -> str | None:
    default = ROOT / ".oracle-cosyvoice-venv" / "bin" / "python"
    py = os.environ.get("VOX_COSYVOICE_ORACLE_PYTHON") or str(default)
    return py if Path(py).exists() else None


def engine_run(program, n: int) -> dict:
    from voxcli.models.base import SamplingParams, SynthesisRequest

    from voxcli.config import EngineConfig
    from voxcli.engine.engine import Engine

    conf = EngineConfig(executor="cpu", policy="full", kv_pages=8192, kv_page_size=16, codec_slots=n,
                        max_running=n, max_queue=4 * n, max_prefill_batch=n,
                        decode_buckets=(1, 2, 4, 8, 16, 32, 64), threads=1)
    eng = Engine(program, conf)
    greedy = SamplingParams(greedy=True)
    reqs = [SynthesisRequest(text=TEXTS[i % len(TEXTS)], sampling=greedy) for i in range(n)]
    wall, cpu = time.perf_counter(), time.process_time()
    streams = [eng.submit(r) for r in reqs]
    samples = [s.wait(timeout=7200).size for s in streams]
    out = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu, "requests": n,
           "audio_s": sum(samples) / program.spec.sample_rate,
           "per_text": {TEXTS[i % len(TEXTS)]: samples[i] for i in range(n)}}
    eng.close()
    return out


def upstream_run(py: str, ckpt: Path, speaker: str, n: int, work: Path, upstream: str) -> dict:
    cases = [{"name": f"r{i}", "kind": "tts", "text": TEXTS[i % len(TEXTS)], "speaker": speaker,
              "stream": True} for i in range(n)]
    (work / "cases.json").write_text(json.dumps(cases))
    env = dict(os.environ, VOX_COSYVOICE_UPSTREAM=upstream, OMP_NUM_THREADS="1")
    subprocess.run([py, str(ROOT / "tests" / "oracle" / "run_cosyvoice.py"), str(ckpt),
                    str(work / "cases.json"), str(work / "out.pt"), "--threads", "1"],
                   check=True, env=env, cwd=str(ROOT / "tests" / "oracle"), stdout=subprocess.DEVNULL)
    import torch

    res = torch.load(work / "out.pt", weights_only=False)
    rs = [res[c["name"]] for c in cases]
    return {"wall_s": sum(r["wall_s"] for r in rs), "cpu_s": sum(r["cpu_s"] for r in rs), "requests": n,
            "audio_s": sum(r["wav"].size for r in rs) / 24000,
            "per_text": {c["text"]: int(r["wav"].size) for c, r in zip(cases, rs, strict=True)}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=16, help="concurrent engine requests")
    ap.add_argument("--upstream-requests", type=int, default=4, help="upstream's sequential requests")
    ap.add_argument("--size", default="bench")
    ap.add_argument("--upstream", default=os.environ.get("VOX_COSYVOICE_UPSTREAM")
                    or str(ROOT.parent / "shared" / "oracle" / "cosyvoice3"))
    a = ap.parse_args()
    import torch
    from voxcli.models import load_model
    from voxcli.models.registry import get_tiny

    py = oracle_python()
    load0 = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="cosy-e2e-"))
    ckpt = get_tiny("cosyvoice3").build(work / "ckpt", size=a.size)
    torch.set_num_threads(1)
    program = load_model(str(ckpt), "cpu", "float32")
    rows = {"engine": engine_run(program, a.requests)}
    if py:  # the tiny checkpoint's one saved speaker
        rows["upstream"] = upstream_run(py, ckpt, program.spec.voices[0], a.upstream_requests, work,
                                        a.upstream)
    load1 = os.getloadavg()[0]
    print(f"CosyVoice 3, size {a.size}, greedy, stream=True, 1 torch thread per side; load average "
          f"{load0:.1f} at the start, {load1:.1f} at the end (2-core machine)")
    print(f"{'':22s} {'requests':>8s} {'audio s':>8s} {'wall s':>8s} {'CPU s':>8s} {'audio-s/wall-s':>15s} "
          f"{'audio-s/CPU-s':>14s}")
    for name, r in rows.items():
        label = f"engine, {r['requests']} concurrent" if name == "engine" else "upstream, sequential"
        print(f"{label:22s} {r['requests']:8d} {r['audio_s']:8.1f} {r['wall_s']:8.1f} {r['cpu_s']:8.1f} "
              f"{r['audio_s'] / r['wall_s']:15.3f} {r['audio_s'] / r['cpu_s']:14.3f}")
    if "upstream" in rows:
        e, u = rows["engine"], rows["upstream"]
        same = all(e["per_text"][t] == n for t, n in u["per_text"].items())
        per_wall = e["audio_s"] / e["wall_s"] / (u["audio_s"] / u["wall_s"])
        print(f"engine / upstream: {per_wall:.1f}x per wall s, "
              f"{e['audio_s'] / e['cpu_s'] / (u['audio_s'] / u['cpu_s']):.1f}x per CPU s; same audio length "
              f"per text on both sides: {'yes' if same else 'NO'}")
    else:
        print("upstream: skipped (no CosyVoice oracle venv: bash scripts/setup_oracle_cosyvoice.sh, or set "
              "VOX_COSYVOICE_ORACLE_PYTHON)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
