"""CSM request options, declared once (models/options.py): the depth decoder's sampling (codebooks 1..K-1),
separately from the backbone's (codebook 0). Each None default means the checkpoint's own
generation_config.json (`depth_decoder_*`); the numbers take the shared ranges."""

from __future__ import annotations

from ..options import OptionSchema, OptionSpec, shared

OPTIONS = OptionSchema(
    (
        OptionSpec("depth_greedy", "bool", "Depth decoder: greedy codes (default: as the request)."),
        shared("depth_temperature", "Depth decoder: sampling temperature."),
        shared("depth_top_k", "Depth decoder: keep the k most likely codes (0 = no top-k filter)."),
        shared("depth_top_p", "Depth decoder: keep the most likely codes up to this probability mass."),
    )
)
