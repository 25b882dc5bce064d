"""Real size hearing: a 10 s clip transcribed by a Bagpiper-layout random checkpoint at OpusLM-Dialogue's
backbone size (the speechlm family's builder, size hear-real), on the cpu engine: X-Codec encode cost per
second of input audio, time to first token, text tokens/s (64 greedy tokens, the text rules' max_step).

    flock /tmp/vox-realsize.lock .venv/bin/python scripts/peak_rss.py 20000 hear-realsize -- \\
        .venv/bin/python -m benchmarks bench_speechlm_hear_realsize [--ckpt DIR] [--dtype bfloat16]

The checkpoint is built once into --ckpt (default ~/.cache/vox-bench/speechlm-hear-real, ~4 GB).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ckpt", type=Path, default=Path.home() / ".cache" / "vox-bench" / "speechlm-hear-real")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--seconds", type=float, default=10.0)
    a = ap.parse_args()
    import torch
    from voxcli.models import load_model
    from voxcli.models.registry import get_tiny

    from voxcli.config import EngineConfig
    from voxcli.engine.engine import Engine
    from voxcli.transcribe import request_for, tap_of

    if not (a.ckpt / "model.pt").exists():
        t = time.time()
        get_tiny("speechlm").build(a.ckpt, size="hear-real")
        print(f"built {a.ckpt} in {time.time() - t:.0f} s", flush=True)
    t = time.time()
    program = load_model(str(a.ckpt), dtype=a.dtype)
    load_s = time.time() - t
    rng = np.random.default_rng(0)
    n = int(a.seconds * 16000)
    tone = 0.3 * np.sin(2 * np.pi * 220 * np.arange(n) / 16000)
    clip = (tone + 0.05 * rng.standard_normal(n)).astype(np.float32)
    enc = program.audio_encoder
    x = torch.from_numpy(clip)[None, None]
    enc.encode(x[..., :16000])  # warm-up
    t, cpu = time.perf_counter(), time.process_time()
    codes = enc.encode(x)
    encode_s, encode_cpu = time.perf_counter() - t, time.process_time() - cpu
    eng = Engine(
        program,
        EngineConfig(
            executor="cpu",
            policy="full",
            kv_pages=128,
            kv_page_size=16,
            codec_slots=1,
            max_running=4,
            threads=2,
        ),
    )
    req = request_for(clip, 16000, greedy=True)
    heard = tap_of(eng).follow(req)
    t = time.perf_counter()
    stream = eng.submit(req)
    stream.wait(timeout=None)
    wall = time.perf_counter() - t
    tl = stream.timeline
    eng.close()
    print(
        json.dumps(
            {
                "clip_s": a.seconds,
                "codes": list(codes.shape),
                "load_s": round(load_s, 1),
                "encode_s": round(encode_s, 3),
                "encode_cpu_s": round(encode_cpu, 3),
                "encode_s_per_audio_s": round(encode_s / a.seconds, 4),
                "ttft_s": round(tl.ttft, 3),
                "tokens": tl.text_tokens,
                "tokens_per_s": round(tl.tokens_per_s or 0.0, 2),
                "wall_s": round(wall, 1),
                "text_head": heard.text[:60],
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
