"""Model-neutral checks of one SynthesisRequest, run by `Engine.submit` before the model's own
`prepare` and long before the request can share a batch: a value that would only blow up inside a
stage (a seed torch cannot take, a NaN or 1e-300 temperature, a top-k past int64) would otherwise fail
every request batched with it. The ranges are the model seam's (models/base.py NUMERIC_BOUNDS, which
every family's `check` applies too); each refusal is an InputError naming the field and the range."""

from __future__ import annotations

from typing import Any

from voxcli.models.base import SEED_MAX, InputError, SynthesisRequest, check_number, check_numbers

__all__ = ["SEED_MAX", "check_request", "check_seed"]


def check_seed(seed: Any, where: str = "seed") -> None:
    check_number(where, seed, "seed")


def check_request(request: SynthesisRequest) -> None:
    """Raise InputError for a field no model could use."""
    if not isinstance(request.text, str):
        raise InputError(f"text must be a string, got {type(request.text).__name__}")
    check_numbers(request)
