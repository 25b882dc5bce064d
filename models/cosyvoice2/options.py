"""CosyVoice 2 request options, declared once (models/options.py): which of upstream's two codec outputs
a request gets (CosyVoice2Model.tts with stream=True or stream=False)."""

from __future__ import annotations

from ..options import OptionSchema, OptionSpec

MODES = ("stream", "offline")

OPTIONS = OptionSchema((
    OptionSpec("codec_mode", "choice", "stream = upstream's stream=True output, offline = its stream=False "
               "output.", "stream", choices=MODES),
))
