"""Model-neutral checks of one SynthesisRequest, run by `Engine.submit` before the model's own
`prepare` and long before the request can share a batch: a value that would only blow up inside a
stage (a seed torch cannot take, a NaN temperature) would otherwise fail every request batched with it.
Each refusal is an InputError whose message names the field and what is accepted."""

from __future__ import annotations

import math
from typing import Any

from voxcli.models.base import InputError, SynthesisRequest

SEED_MAX = 2**63 - 1  # torch.Generator.manual_seed takes a signed/unsigned 64-bit value: stay in both


def check_seed(seed: Any, where: str = "seed") -> None:
    if seed is None:
        return
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InputError(f"{where} must be a whole number from 0 to {SEED_MAX}, got {seed!r}")
    if not 0 <= seed <= SEED_MAX:
        raise InputError(f"{where} must be a whole number from 0 to {SEED_MAX}, got {seed}")


def _whole(value: Any, name: str, lo: int = 1) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < lo:
        raise InputError(f"{name} must be a whole number >= {lo}, got {value!r}")


def _finite(value: Any, name: str, lo: float, hi: float | None = None, lo_open: bool = True) -> None:
    if value is None:
        return
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) \
        and (value > lo if lo_open else value >= lo) and (hi is None or value <= hi)
    if not ok:
        bound = f"above {lo:g}" if lo_open else f"at least {lo:g}"
        upper = f" and at most {hi:g}" if hi is not None else ""
        raise InputError(f"{name} must be a finite number {bound}{upper}, got {value!r}")


def check_request(request: SynthesisRequest) -> None:
    """Raise InputError for a field no model could use."""
    if not isinstance(request.text, str):
        raise InputError(f"text must be a string, got {type(request.text).__name__}")
    check_seed(request.seed)
    _whole(request.max_frames, "max_frames")
    _whole(request.fixed_frames, "fixed_frames", 0)  # 0: a request with no audio (tests)
    s = request.sampling
    _finite(getattr(s, "temperature", None), "temperature", 0.0)
    _finite(getattr(s, "top_p", None), "top_p", 0.0, 1.0)
    _finite(getattr(s, "repetition_penalty", None), "repetition_penalty", 0.0)
    _whole(getattr(s, "top_k", None), "top_k", 0)  # 0 = no top-k filter
    _finite(request.cfg_scale, "cfg_scale", 0.0, lo_open=False)
    if request.ref_sample_rate is not None:
        _whole(request.ref_sample_rate, "ref_sample_rate")
