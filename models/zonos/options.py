"""Zonos request options (models/options.py): its continuous conditioning, each bounded by the range the
checkpoint's conditioner normalises it with (CONDITIONING_README of the reference), and its sampler's
extras. Every default is the reference's `make_cond_dict` / `generate` default."""

from __future__ import annotations

from ..bounds import NumberRange
from ..options import OptionSchema, OptionSpec

EMOTIONS = ("happiness", "sadness", "disgust", "fear", "surprise", "anger", "other", "neutral")
DEFAULT_EMOTION = (0.3077, 0.0256, 0.0256, 0.0256, 0.0256, 0.0256, 0.2564, 0.3077)
UNIT = NumberRange(0.0, 1.0)

OPTIONS = OptionSchema(
    (
        *(
            OptionSpec(
                f"emotion_{e}",
                "number",
                f"Emotion weight of {e} (the eight are normalised to sum 1; at least one must be above 0).",
                d,
                UNIT,
            )
            for e, d in zip(EMOTIONS, DEFAULT_EMOTION, strict=True)
        ),
        OptionSpec(
            "pitch_std",
            "number",
            "Pitch variation in Hz: 20-45 normal speech, 60-150 expressive.",
            20.0,
            NumberRange(0.0, 400.0),
        ),
        OptionSpec(
            "speaking_rate",
            "number",
            "Phonemes per second: 10 slow, 30 very fast.",
            15.0,
            NumberRange(0.0, 40.0),
        ),
        OptionSpec(
            "fmax",
            "number",
            "Highest audio frequency in Hz the voice is conditioned on (22050 for "
            "44.1 kHz, 24000 for 48 kHz data).",
            22050.0,
            NumberRange(0.0, 24000.0),
        ),
        OptionSpec(
            "min_p", "number", "Keep codes at least this fraction as likely as the best (0 = off).", 0.1, UNIT
        ),
        OptionSpec(
            "repetition_window",
            "whole",
            "Delayed columns the repetition penalty looks back over.",
            2,
            NumberRange(1, 64, whole=True),
        ),
    )
)
