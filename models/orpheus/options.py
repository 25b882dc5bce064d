"""Orpheus request options, declared once (models/options.py): how SNAC streams the request's audio
(codec.py). "whole" is exact to decoding the whole utterance at once and holds back 3 frames (256 ms);
"canopy" is canopyai/Orpheus-TTS's rule (each frame from the four-frame window around it; the first frame
and the last two are not played)."""

from __future__ import annotations

from ..options import OptionSchema, OptionSpec

OPTIONS = OptionSchema(
    (
        OptionSpec(
            "snac_stream",
            "choice",
            "How SNAC decodes the stream: whole (exact to the whole-utterance "
            "decode, 3 frames held back) or canopy (the Orpheus-TTS server's 4-frame windows).",
            "whole",
            choices=("whole", "canopy"),
        ),
    )
)
