"""ESPnet SpeechLM request options, declared once (models/options.py): how many segments a request may
run before it stops (the reference loops while segments end in <eot>) and the text phase's own sampling
(the shared temperature / top_k set the audio's; inference.yaml the rest).

`MAX_SEGMENTS` bounds the per-request planning (`SpeechLMProgram.seq_positions` sums one term per
segment) and the KV a request reserves: each segment may take the longest rule's `max_step` positions.
"""

from __future__ import annotations

from ..base import NUMERIC_BOUNDS, NumberRange
from ..options import OptionSchema, OptionSpec

MAX_SEGMENTS = 64

OPTIONS = OptionSchema((
    OptionSpec("max_segments", "whole", "Segments (text or audio) before the request stops "
               "(default: 2, or the checkpoint's enforced modalities).", None,
               NumberRange(1, MAX_SEGMENTS, whole=True)),
    OptionSpec("text_temperature", "number", "Sampling temperature of the text phase (default: "
               "inference.yaml's).", None, NUMERIC_BOUNDS["temperature"]),
    OptionSpec("text_top_k", "whole", "Keep the k most likely text tokens (a k past the vocabulary keeps "
               "them all; default: inference.yaml's).", None, NumberRange(1, NUMERIC_BOUNDS["top_k"].hi,
                                                                          whole=True)),
))
