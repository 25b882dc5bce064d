"""The request options of upstream's CosyVoice models (2 and 3), declared once (models/options.py): which
of upstream's two codec outputs a request gets (CosyVoice2Model/CosyVoice3Model.tts with stream=True or
stream=False). Torch-free: the families' registrations import it."""

from __future__ import annotations

from ..options import OptionSchema, OptionSpec

MODES = ("stream", "offline")

OPTIONS = OptionSchema((
    OptionSpec("codec_mode", "choice", "stream = upstream's stream=True output, offline = its stream=False "
               "output.", "stream", choices=MODES),
))
