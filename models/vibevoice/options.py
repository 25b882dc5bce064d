"""VibeVoice request options, declared once (models/options.py). `diffusion_steps`: the DPM-Solver steps
per frame (None: generation_config.json's `num_diffusion_steps`, 10 for the release); fewer steps are
cheaper frames (the cost model prices every step). Guidance is the request's `cfg_scale` (None: the
checkpoint's `guidance_scale`, 1.3), which scales both the diffusion head's CFG and the token guidance."""

from __future__ import annotations

from ..bounds import NumberRange
from ..options import OptionSchema, OptionSpec

OPTIONS = OptionSchema(
    (
        OptionSpec("diffusion_steps", "whole", "DPM-Solver steps per frame (default: the checkpoint's, 10).",
                   range=NumberRange(1, 100, whole=True)),
    )
)
