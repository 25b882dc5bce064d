"""Qwen3-TTS request options, declared once (models/options.py): the depth transformer's ("sub-talker")
sampling, separately from the talker's, and the text mode. Each None default means the checkpoint's own
(generation_config.json); the numbers take the shared ranges (the sub-talker samples as the talker does)."""

from __future__ import annotations

from ..options import OptionSchema, OptionSpec, shared

OPTIONS = OptionSchema((
    OptionSpec("sub_greedy", "bool", "Depth transformer: greedy codes (default: as the request)."),
    shared("sub_temperature", "Depth transformer: sampling temperature."),
    shared("sub_top_k", "Depth transformer: keep the k most likely codes (0 = no top-k filter)."),
    shared("sub_top_p", "Depth transformer: keep the most likely codes up to this probability mass."),
    OptionSpec("streaming_text", "bool", "Feed the text as generation goes (default: Base models only)."),
))
