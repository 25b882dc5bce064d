"""Per-chunk codec cost of CosyVoice 3 streaming: ours (per-slot DiT block caches + windowed vocoder) vs
upstream's re-run of the flow over the whole token history and the vocoder over the whole mel.

usage: python -m benchmarks bench_cosyvoice_codec [--seconds 60] [--size bench] [--oracle PYTHON]

A random-weight checkpoint of `--size` (models/cosyvoice3/tiny.py SIZES; "bench": DiT 256 x 6, HiFT 128)
and `--seconds` of random speech tokens, fed in upstream's hops (25 + pad, 50, then 100 tokens). Both
sides run one thread on the CPU and are timed in process CPU time, side by side in this run:
  ours      the program's codec stage, one call per hop (what the engine's codec lane runs)
  rerun     the same kernels doing what upstream does per hop: the block-causal flow over every token so
            far and the vocoder over every mel frame so far
  upstream  (with --oracle, the CosyVoice oracle venv's python) upstream's own CosyVoice3Model.tts
            (stream=True) on the same tokens and checkpoint, each token2wav call timed
The last chunk is full attention over the whole utterance by upstream's definition, for both.
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

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--size", default="bench")
    ap.add_argument("--oracle", default="", help="the CosyVoice oracle venv's python: also time upstream")
    ap.add_argument("--upstream", default=str(REPO.parent / "shared" / "oracle" / "cosyvoice3"))
    a = ap.parse_args()
    torch.set_num_threads(1)
    from voxcli.models import load_model
    from voxcli.models.base import CodecItem, SynthesisRequest
    from voxcli.models.registry import get_tiny

    work = Path(tempfile.mkdtemp(prefix="cosy-bench-"))
    ckpt = get_tiny("cosyvoice3").build(work / "ckpt", size=a.size)
    program = load_model(str(ckpt), "cpu", "float32")
    speaker = program.spec.voices[0]  # the tiny checkpoint's one saved speaker
    n = int(a.seconds * 25)
    toks = np.random.RandomState(0).randint(0, 6561, n).astype(np.int64)
    ends = program.codec_stage.stream_hop_ends(program.speakers[speaker].voice.prompt_tokens.numel(), n)
    feeds = [e + 3 for e in ends] + [n]
    program.init_codec_slots(1)
    program.bind_slot(0, program.prepare(SynthesisRequest(text="hi.")))
    ours, prev = [], 0
    for i, f in enumerate(feeds):
        t0 = time.process_time()
        program.codec([CodecItem(slot=0, codes=toks[prev:f, None], first=i == 0, last=f == n)])
        ours.append(time.process_time() - t0)
        prev = f
    rerun = [rerun_hop(program, toks, e, last=False) for e in ends] + [rerun_hop(program, toks, n, last=True)]
    upstream = run_upstream(a, ckpt, speaker, toks, work) if a.oracle else None
    rows = []
    for k in sorted({1, 5, 10, 15, 20, len(feeds)}):
        if k <= len(feeds):
            up = f"{upstream[k - 1]:9.2f}" if upstream else "        -"
            rows.append(
                f"{k:5d} {feeds[k - 1]:6d} {ours[k - 1]:8.2f} {rerun[k - 1]:8.2f} {up} "
                f"{rerun[k - 1] / max(ours[k - 1], 1e-9):7.1f}x"
            )
    print(
        f"CosyVoice 3 codec, size {a.size}, {a.seconds:.0f} s ({n} tokens, {len(feeds)} chunks; the last is "
        "full attention), CPU seconds per chunk (1 thread)"
    )
    print("chunk tokens     ours    rerun  upstream  rerun/ours")
    print("\n".join(rows))
    print(
        f"total: ours {sum(ours):.1f} s, rerun {sum(rerun):.1f} s"
        + (f", upstream {sum(upstream):.1f} s" if upstream else "")
    )


def rerun_hop(program, toks: np.ndarray, end: int, last: bool) -> float:
    """Upstream's per-hop work with our kernels: the flow over tokens[:end (+3)] from frame 0, then the
    vocoder over all of that mel."""

    cs = program.codec_stage
    spk = next(iter(program.speakers.values())).voice
    t0 = time.process_time()
    with torch.inference_mode():
        run = cs.flow.new_run(spk.prompt_tokens, spk.prompt_feat, spk.embedding)
        t = torch.from_numpy(toks[: end if last else end + 3])
        mu = cs.flow.mu(run, t, finalize=last)
        mel = cs.flow.solve([run], [mu], [0], streaming=not last, keep=False)[0][spk.prompt_feat.shape[0] :].T
        h = cs.hift
        f0 = h.f0(mel, None)
        src = h.source(f0, torch.cumsum(h.rad(f0), 0), 0)
        h.decode(mel, None, src)
    return time.process_time() - t0


def run_upstream(a, ckpt: Path, speaker: str, toks: np.ndarray, work: Path) -> list[float]:
    cases = [{"name": "t", "kind": "token2wav", "tokens": toks.tolist(), "speaker": speaker, "stream": True}]
    (work / "cases.json").write_text(json.dumps(cases))
    env = dict(os.environ, VOX_COSYVOICE_UPSTREAM=a.upstream, OMP_NUM_THREADS="1")
    subprocess.run(
        [
            a.oracle,
            str(REPO / "tests" / "oracle" / "run_cosyvoice.py"),
            str(ckpt),
            str(work / "cases.json"),
            str(work / "out.pt"),
            "--threads",
            "1",
        ],
        check=True,
        env=env,
        cwd=str(REPO / "tests" / "oracle"),
        stdout=subprocess.DEVNULL,
    )
    return list(torch.load(work / "out.pt", weights_only=False)["t"]["chunk_cpu_s"])


if __name__ == "__main__":
    sys.exit(main())
