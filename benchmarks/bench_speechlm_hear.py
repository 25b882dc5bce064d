"""Audio in, tokens/s: the engine vs ESPnet's own sequential `inference` (task audio_to_text) on the same
bench-size random checkpoint (built by ESPnet's classes with its DiscreteAudioIO over a tiny X-Codec whose
encoder is real; the speechlm oracle venv).

    .venv/bin/python -m benchmarks bench_speechlm_hear [--tokens 32] [--espnet-requests 4] [--clip-s 5]

Each request: one clip of --clip-s seconds at 16 kHz (encoded inside the request: X-Codec on the prompt's
path, in both), then exactly --tokens greedy text tokens (min_step = max_step). ESPnet: one request at a
time, as bin/inference.py serves. Engine: the cpu executor, 1 and 16 requests submitted at once. Tokens/s =
text tokens / wall seconds (and per process-CPU second: this machine is shared, that column is the one to
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
ORACLE = ROOT / "tests" / "oracle" / "run_speechlm_audio_in.py"


def job(tokens: int, clip_s: float) -> dict:
    return {
        "calibrate": False,
        "codec_lengths": [],
        "cases": [{"name": "a", "clip": "c"}],
        "spec": {
            "seed": 0,
            "text_vocab": 64,
            "weight_scale": 1.0,
            "backbone": {
                "arch": "qwen3",
                "hidden": 256,
                "mlp": 1024,
                "layers": 4,
                "heads": 4,
                "kv_heads": 2,
                "head_dim": 64,
            },
            "audio": {
                "n_ssl": 0,
                "ssl_k": 0,
                "n_codec": 8,
                "codec_k": 16,
                "xcodec": {
                    "ratios": [2, 4, 5, 8],
                    "decoder_hidden": 32,
                    "latent": 8,
                    "bandwidths": [0.8, 1.6],
                },
            },
            "inference": {
                "enforce_modality": ["text"],
                "text": {"temperature": 0.0, "topk": 20, "cfg": 1, "max_step": tokens, "min_step": tokens},
            },
            "clips": {"c": {"seed": 1, "samples": int(clip_s * 16000), "rate": 16000}},
        },
    }


def engine_run(ckpt: Path, clip, n: int) -> dict:
    import torch
    from voxcli.models import load_model

    from voxcli.config import EngineConfig
    from voxcli.engine.engine import Engine
    from voxcli.transcribe import request_for

    torch.set_num_threads(2)
    eng = Engine(
        load_model(str(ckpt)),
        EngineConfig(
            executor="cpu",
            policy="full",
            kv_pages=4096,
            kv_page_size=16,
            codec_slots=1,
            max_running=64,
            threads=2,
        ),
    )
    eng.submit(request_for(clip, 16000, greedy=True)).wait(timeout=None)  # warm-up
    wall, cpu = time.perf_counter(), time.process_time()
    streams = [eng.submit(request_for(clip, 16000, greedy=True)) for _ in range(n)]
    for s in streams:
        s.wait(timeout=None)
    out = {
        "wall_s": time.perf_counter() - wall,
        "cpu_s": time.process_time() - cpu,
        "requests": n,
        "tokens": sum(s.timeline.text_tokens for s in streams),
    }
    out["ttft_s_p50"] = sorted(s.timeline.ttft for s in streams)[n // 2]
    eng.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--espnet-requests", type=int, default=4)
    ap.add_argument("--clip-s", type=float, default=5.0)
    a = ap.parse_args()
    py = os.environ.get("VOX_SPEECHLM_ORACLE_PYTHON") or str(
        ROOT / ".oracle-speechlm-venv" / "bin" / "python"
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "job.json").write_text(json.dumps(job(a.tokens, a.clip_s)))
        env = dict(os.environ, OMP_NUM_THREADS="2", HF_HUB_OFFLINE="1")
        subprocess.run(
            [py, str(ORACLE), "all", str(root / "ckpt"), str(root / "job.json"), str(root / "o.pt")],
            check=True,
            env=env,
            capture_output=True,
        )
        p = subprocess.run(
            [py, str(ORACLE), "time", str(root / "ckpt"), str(root / "job.json"), str(a.espnet_requests)],
            check=True,
            env=env,
            capture_output=True,
            text=True,
        )
        espnet = json.loads(p.stdout.strip().splitlines()[-1])
        import torch

        clip = torch.load(root / "o.pt", weights_only=False)["clips"]["c"]
        rows = {"espnet sequential": espnet}
        for n in (1, 16):
            rows[f"engine x{n}"] = engine_run(root / "ckpt", clip, n)
    for name, r in rows.items():
        print(
            f"{name:18s} tokens {r['tokens']:5d}  {r['tokens'] / r['wall_s']:8.1f} tok/s wall  "
            f"{r['tokens'] / r['cpu_s']:8.1f} tok/CPU-s"
            + (f"  TTFT p50 {r['ttft_s_p50']:.3f} s" if "ttft_s_p50" in r else "")
        )
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
