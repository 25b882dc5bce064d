"""Mixed traffic on one engine in the sim (virtual time): Bagpiper-8B TTS requests with and without 30% of
the arrivals being audio-in (transcription) requests; TTS capacity at 90% SLO and the audio-in requests'
time to first token.

    .venv/bin/python -m benchmarks bench_speechlm_audio_in [--gpu h100] [--rates 1,2,3,4] [--seconds 60]

Workload (assumptions, stated): TTS texts from the shipped LibriTTS test-clean list (voxcli/bench/data),
each `fixed_frames` = its estimated length; audio-in clips with LibriSpeech test-clean-like durations
(2620 utterances, 5.4 h: mean 7.4 s; lognormal with median 6 s and sigma 0.6, clipped to 1.5..35 s);
answers of 3.5 tokens per audio second and an X-Codec encode charged as 3% extra prefill tokens
(voxcli/sim/synthetic.py states both; `--encode-share 0.10` is the pessimistic setting). Poisson
arrivals, 60 s per rate, seeds 0 and 1. SLO (TTS): TTFA <= the recipe's target (recipes/bagpiper-8b.toml:
1 s, the text plan comes first) and no stall (voxcli/bench/metrics.py);
capacity = the highest rate of the list at which >= 90% of the TTS requests met it (per seed). Audio-in:
TTFT = arrival to the step that sampled its first text token; tokens/s = (tokens - 1) / (last - first).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def run(gpu: str, rate: float, seed: int, share: float, seconds: float) -> dict:
    from voxcli.models.base import SynthesisRequest

    from voxcli.bench.audio_in import clip_seconds  # the LibriSpeech-like durations `vox bench` mixes in
    from voxcli.bench.client import poisson_times, record_from_timeline
    from voxcli.bench.metrics import meets_slo
    from voxcli.bench.targets import model_config
    from voxcli.bench.workloads import estimate_frames, load_workload
    from voxcli.session import open_session

    cfg = model_config("bagpiper-8b", "sim", gpu)
    eng = open_session(cfg, wall_clock=False).engine
    texts = load_workload("libritts")
    rng = random.Random(seed)
    start = eng.now + 0.001
    tts, heard = [], []
    for i, t in enumerate(poisson_times(rate, seconds, seed)):
        if rng.random() < share:
            n = int(clip_seconds(rng) * 16000)
            req = SynthesisRequest(
                text="", input_audio=np.zeros(n, np.float32), input_sample_rate=16000, request_id=f"heard-{i}"
            )
            heard.append(eng.submit(req, at=start + t))
        else:
            u = texts[rng.randrange(len(texts))]
            req = SynthesisRequest(text=u.text, fixed_frames=estimate_frames(u.text), request_id=f"tts-{i}")
            tts.append(eng.submit(req, at=start + t))
        (heard if req.input_audio is not None else tts)[-1].drop_audio()
    eng.run(until=None)
    recs = [record_from_timeline(s.timeline, start) for s in tts]  # vox bench --audio-in-share does this too
    met = sum(meets_slo(r, cfg.ttfa_target_s) for r in recs) / max(1, len(recs))
    ttft = [s.timeline.ttft for s in heard if s.timeline.ttft is not None]
    tps = [s.timeline.tokens_per_s for s in heard if s.timeline.tokens_per_s]
    eng.close()
    return {
        "rate": rate,
        "seed": seed,
        "share": share,
        "tts": len(tts),
        "heard": len(heard),
        "met": met,
        "heard_done": sum(s.status == "done" for s in heard),
        "ttft_p50": statistics.median(ttft) if ttft else None,
        "ttft_p90": float(np.percentile(ttft, 90)) if ttft else None,
        "tokens_per_s_p50": statistics.median(tps) if tps else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpu", default="h100")
    ap.add_argument("--rates", default="1,2,3,4,5,6")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--share", type=float, default=0.3)
    ap.add_argument("--encode-share", type=float, default=None, help="override ENCODE_TOKEN_SHARE")
    a = ap.parse_args()
    if a.encode_share is not None:
        import voxcli.sim.synthetic as syn

        syn.ENCODE_TOKEN_SHARE = a.encode_share
    rates = [float(x) for x in a.rates.split(",")]
    rows = []
    for share in (0.0, a.share):
        for seed in (0, 1):
            for rate in rates:
                r = run(a.gpu, rate, seed, share, a.seconds)
                rows.append(r)
                print(json.dumps(r), flush=True)
    for share in (0.0, a.share):
        caps = []
        for seed in (0, 1):
            ok = [r["rate"] for r in rows if r["share"] == share and r["seed"] == seed and r["met"] >= 0.9]
            caps.append(max(ok) if ok else 0.0)
        print(f"share audio-in {share:.0%}: TTS capacity at 90% SLO per seed {caps} req/s")


if __name__ == "__main__":
    main()
