"""Kyutai TTS request options (models/options.py): the state machine's padding knobs as moshi's TTSModel
exposes them. The distilled CFG strength is the shared `cfg_scale` field (one of the checkpoint's `cfg`
conditioner values, 1.0 to 4.0 by 0.5; default 2.0 as delayed-streams-modeling's tts_pytorch.py)."""

from __future__ import annotations

from ..bounds import NumberRange
from ..options import OptionSchema, OptionSpec

OPTIONS = OptionSchema(
    (
        OptionSpec("padding_between", "whole",
                   "Pads forced after each word besides its tokens (tts_pytorch.py: 1).",
                   1, NumberRange(0, 16, whole=True)),
        OptionSpec("max_padding", "whole", "Most pads in a row before a new word is forced (moshi: 8).",
                   8, NumberRange(1, 64, whole=True)),
        OptionSpec("initial_padding", "whole", "Pads forced before the first word (moshi: 2).",
                   2, NumberRange(0, 64, whole=True)),
        OptionSpec("final_padding", "whole", "Steps run past the audio delay after the last word (moshi: 4).",
                   4, NumberRange(0, 64, whole=True)),
    )
)
