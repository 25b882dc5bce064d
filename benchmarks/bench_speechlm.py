"""Decode throughput of the engine vs ESPnet's own sequential inference, side by side in one run, on the
same bench-size random checkpoint (built by ESPnet's classes in the speechlm oracle venv).

    .venv/bin/python -m benchmarks bench_speechlm [--frames 40] [--espnet-requests 4]

Tokens are decode steps of one request (all S streams of a step sampled together; a CFG pair's step is
one token of one request). ESPnet: `inference` one request at a time (as bin/inference.py serves), audio
only, exactly F + S - 1 steps (eos masked until min_step = max_step). Engine: the cpu executor with 16
and 64 requests submitted at once, each `fixed_frames` = F (the same F + S - 1 steps). Both at CFG 1 and
3; "CFG kept" = engine tokens/s at CFG 3 / at CFG 1 for the same requests, with the companions' shared
all-pad prefix (program.share_pad_prefix, the default) and without it (each companion's own prefill), side
by side. Times: wall clock and the process CPU time (this machine is shared; the CPU column is the one to
read there).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ORACLE = ROOT / "tests" / "oracle" / "run_speechlm.py"
SPEC = {"seed": 0, "text_vocab": 64, "weight_scale": 1.0,
        "backbone": {"arch": "qwen3", "hidden": 256, "mlp": 1024, "layers": 4, "heads": 4, "kv_heads": 2,
                     "head_dim": 64},
        # a tiny X-Codec (the engine decodes every chunk; its CPU time is inside the engine's figures)
        "audio": {"n_ssl": 0, "ssl_k": 0, "n_codec": 8, "codec_k": 1024,
                  "xcodec": {"ratios": [2, 4, 5, 8], "decoder_hidden": 16, "latent": 8, "bandwidths": [4.0]}},
        "inference": {"enforce_modality": ["audio"],
                      "text": {"temperature": 0.0, "topk": 20, "cfg": 1, "max_step": 8, "min_step": 1},
                      "audio": {"temperature": 0.0, "topk": 20, "cfg": 3, "max_step": 100, "min_step": 1}}}


def oracle_python() -> str:
    default = ROOT / ".oracle-speechlm-venv" / "bin" / "python"
    py = os.environ.get("VOX_SPEECHLM_ORACLE_PYTHON") or str(default)
    if not Path(py).exists():
        raise SystemExit(f"{py} not found: build it with scripts/setup_oracle_speechlm.sh (or set "
                         "VOX_SPEECHLM_ORACLE_PYTHON)")
    return py


def engine_run(ckpt: Path, n: int, frames: int, cfg: float, share: bool = True, words: int = 8) -> dict:
    import torch
    from voxcli.models import load_model
    from voxcli.models.base import SamplingParams, SynthesisRequest

    from voxcli.config import EngineConfig
    from voxcli.engine.engine import Engine

    program = load_model(str(ckpt))
    program.share_pad_prefix = share
    steps = [0]
    for stage in ("prefill", "decode"):
        inner = getattr(program, stage)

        def counted(rows, inner=inner):
            steps[0] += len(rows)
            return inner(rows)

        setattr(program, stage, counted)
    conf = EngineConfig(executor="cpu", policy="full", kv_pages=8192, kv_page_size=16, codec_slots=n,
                        max_running=2 * n, max_queue=4 * n, max_prefill_batch=16,
                        decode_buckets=(1, 2, 4, 8, 16, 32, 64, 128), threads=1)
    eng = Engine(program, conf)
    text = " ".join(f"w{1 + k % 60}" for k in range(words))
    reqs = [SynthesisRequest(text=text, cfg_scale=cfg, fixed_frames=frames, seed=i,
                             sampling=SamplingParams(greedy=True)) for i in range(n)]
    torch.set_num_threads(1)
    wall, cpu = time.perf_counter(), time.process_time()
    streams = [eng.submit(r) for r in reqs]
    for s in streams:
        s.wait(timeout=3600)
    out = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu, "requests": n,
           "steps": steps[0]}
    eng.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--espnet-requests", type=int, default=4)
    ap.add_argument("--prompt-words", type=int, default=8, help="the engine's prompt length (a Bagpiper-"
                    "TTS request's context before its audio is prompt + text plan: hundreds of tokens); the "
                    "ESPnet rows keep their 8 words, so read only the CFG-kept figures at other lengths")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = Path(tmp) / "bench"
        ckpt.mkdir()
        (ckpt / "spec.json").write_text(json.dumps(SPEC))
        env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
        subprocess.run([oracle_python(), str(ORACLE), "build", str(ckpt), str(ckpt / "spec.json")],
                       check=True, env=env, capture_output=True, cwd=str(ORACLE.parent))
        S = SPEC["audio"]["n_codec"]
        steps = args.frames + S - 1
        t = subprocess.run([oracle_python(), str(ORACLE), "time", str(ckpt), str(args.espnet_requests),
                            str(steps)], check=True, env=env, capture_output=True, text=True,
                           cwd=str(ORACLE.parent))
        espnet = json.loads(t.stdout.strip().splitlines()[-1])
        rows = []
        for w in (1.0, 3.0):
            e = espnet[str(w)]
            rows.append((f"ESPnet sequential, CFG {w:g}", e))
            for n in (16, 64):
                rows.append((f"engine {n} concurrent, CFG {w:g}",
                             engine_run(ckpt, n, args.frames, w, words=args.prompt_words)))
                if w > 1:
                    rows.append((f"engine {n} unshared, CFG {w:g}",
                                 engine_run(ckpt, n, args.frames, w, share=False,
                                            words=args.prompt_words)))
    print(f"bench-size Qwen3 backbone {SPEC['backbone']}, {S} streams, {args.frames} frames/request "
          f"({steps} steps); torch threads 1")
    print(f"{'':34} {'tokens':>7} {'wall s':>8} {'cpu s':>8} {'tok/s wall':>11} {'tok/s cpu':>10}")
    base: dict[str, tuple[float, float]] = {}  # ESPnet's (wall, cpu) tokens/s per CFG
    for name, r in rows:
        tw, tc = r["steps"] / r["wall_s"], r["steps"] / r["cpu_s"]
        cfg = name.split(",")[1]
        if name.startswith("ESPnet"):
            base[cfg] = (tw, tc)
            ratio = ""
        else:
            ratio = f"   x{tw / base[cfg][0]:.1f} wall, x{tc / base[cfg][1]:.1f} cpu vs ESPnet"
        print(f"{name:34} {r['steps']:7d} {r['wall_s']:8.2f} {r['cpu_s']:8.2f} {tw:11.1f} {tc:10.1f}{ratio}")
    eng = {name: r["steps"] / r["cpu_s"] for name, r in rows if name.startswith("engine")}
    for n in (16, 64):
        base1 = eng[f"engine {n} concurrent, CFG 1"]
        kept = eng[f"engine {n} concurrent, CFG 3"] / base1
        unshared = eng[f"engine {n} unshared, CFG 3"] / base1
        print(f"CFG throughput kept at {n} concurrent (cpu tok/s, CFG 3 / CFG 1): {kept:.0%} with the "
              f"shared pad prefix, {unshared:.0%} without")


if __name__ == "__main__":
    main()
