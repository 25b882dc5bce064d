"""The mixed workload of `vox bench --audio-in-share S`: TTS arrivals plus a share S of audio-in
(transcription: a clip in, text out) requests, on the sim executor.

Assumptions (stated, as in benchmarks/bench_speechlm_audio_in.py and voxcli/sim/synthetic.py):
- Which arrivals hear: each arrival of the TTS schedule is turned into an audio-in request with
  probability S, drawn from its own seeded RNG (the arrival times are the schedule's own, so a mixed run
  and a TTS-only run of one seed share their Poisson times).
- Clip durations are LibriSpeech test-clean-like (2620 utterances, 5.4 h, mean 7.4 s): lognormal with
  median 6 s and sigma 0.6, clipped to 1.5..35 s, drawn from the same seeded RNG.
- The clip is silence at 16 kHz (the sim charges its length, not its content); the sim program answers
  3.5 text tokens per audio second and charges X-Codec's encode as 3% extra prefill tokens
  (voxcli/sim/synthetic.py).
An audio-in request emits no audio, so it is no TTS request: the TTS SLO and capacity count TTS requests
only; audio-in requests report time to first token and tokens per second (voxcli/bench/metrics.py). A rate
(req/s) is every arrival's: at share S the TTS requests arrive at (1 - S) times it. The capacity bound
table (voxcli/sim/bound.py) prices TTS requests only.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from voxcli.bench.client import Arrival

CLIP_MEDIAN_S = 6.0
CLIP_SIGMA = 0.6
CLIP_MIN_S, CLIP_MAX_S = 1.5, 35.0
SHARE_HELP = ("Turn this share (0..1) of the arrivals into audio-in (transcription) requests, sim only: "
              "LibriSpeech test-clean-like clips (lognormal, median 6 s, sigma 0.6, 1.5..35 s); the TTS "
              "SLO counts TTS requests only, audio-in ones report TTFT and tokens/s.")

# The sim models whose real checkpoint takes a user audio turn: Bagpiper encodes input audio with X-Codec's
# encoder (models/speechlm/xcodec_encoder.py). OpusLM's SSL stream (XEUS + k-means) is refused by
# models/speechlm/audio_in.py, so opuslm-7b does not hear; no other family takes audio input.
HEARING_SIM_MODELS = ("bagpiper-8b", "espnet/bagpiper-tts-sft")


def clip_seconds(rng: random.Random) -> float:
    """One LibriSpeech test-clean-like clip duration (see the module docstring)."""
    return min(CLIP_MAX_S, max(CLIP_MIN_S, rng.lognormvariate(math.log(CLIP_MEDIAN_S), CLIP_SIGMA)))


def mix_audio_in(arrivals: Sequence[Arrival], share: float, seed: int) -> list[Arrival]:
    """`arrivals` with each turned into an audio-in request (a clip duration) with probability `share`."""
    rng = random.Random(seed * 7 + 104729)
    out = []
    for a in arrivals:
        heard = rng.random() < share
        clip = clip_seconds(rng)  # drawn for every arrival: a share changes which, not the durations
        out.append(replace(a, clip_s=clip, frames=0) if heard else a)
    return out


def share_refusal(share: float, executor: str, model: str) -> str | None:
    """Why `--audio-in-share share` cannot run (one sentence), or None."""
    if not 0.0 <= share <= 1.0 or not math.isfinite(share):
        return f"--audio-in-share must be between 0 and 1, got {share:g}"
    if share == 0.0:
        return None
    if executor != "sim":
        return "--audio-in-share runs on the sim executor only (--executor sim)"
    if model.lower() not in HEARING_SIM_MODELS:
        return (f"model {model} cannot hear (only {HEARING_SIM_MODELS[0]} takes audio input in the sim), so "
                "--audio-in-share cannot be used with it")
    return None
