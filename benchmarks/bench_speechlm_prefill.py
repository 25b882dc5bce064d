"""What the CFG companions' shared all-pad prefix saves: thread CPU time of one `prefill` call for N CFG
requests (guidance 3) with the companion's pad prefix shared vs computed by its own forward pass, beside
the same requests without guidance, on an ESPnet SpeechLM checkpoint (e.g. bench_speechlm.py's bench-size
one, or `make_tiny.py OUT --family speechlm`). Median of --repeats; the two CFG settings alternate twice.

    .venv/bin/python -m benchmarks bench_speechlm_prefill CKPT [--requests 16] [--words 200] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    import torch
    from voxcli.models import load_model
    from voxcli.models.base import Row, SamplingParams, SynthesisRequest

    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("--requests", type=int, default=16)
    ap.add_argument("--words", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(1)
    program = load_model(a.ckpt)
    text = " ".join(f"w{1 + k % 60}" for k in range(a.words))

    def prompts(w: float) -> list:
        return [program.prepare(SynthesisRequest(text=text, cfg_scale=w, fixed_frames=40, seed=i,
                                                 sampling=SamplingParams(greedy=True)))
                for i in range(a.requests)]

    program.init_kv(num_pages=1, page_size=16)
    per = program.kv_tokens(prompts(3.0)[0]) // 16
    program.init_kv(num_pages=per * a.requests + 8, page_size=16)

    def timed(w: float) -> float:
        ts = []
        for _ in range(a.repeats):
            ps = prompts(w)
            n = program.kv_tokens(ps[0]) // 16
            rows = [Row(request_id=i, prompt=q, pages=list(range(i * n, (i + 1) * n)))
                    for i, q in enumerate(ps)]
            t = time.thread_time()
            program.prefill(rows)
            ts.append(time.thread_time() - t)
            for r in rows:
                program.release(r)
        return statistics.median(ts)

    res: dict[bool, list[float]] = {True: [], False: []}
    for share in (True, False, True, False):
        program.share_pad_prefix = share
        program.drop_pad_prefix()
        res[share].append(timed(3.0))
    base = timed(1.0)
    print(f"prefill of {a.requests} requests, {a.words}-word prompt, thread CPU s (median of {a.repeats}): "
          f"CFG 1 {base:.3f}; CFG 3 shared pad prefix {', '.join(f'{x:.3f}' for x in res[True])}; "
          f"CFG 3 own forward {', '.join(f'{x:.3f}' for x in res[False])}")


if __name__ == "__main__":
    main()
