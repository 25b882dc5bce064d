"""Model-neutral checks of one SynthesisRequest, run by `Engine.submit` (and a session's `check`) before
the model's own `prepare` and long before the request can share a batch: a value that would only blow up
inside a stage (a seed torch cannot take, a NaN or 1e-300 temperature, a top-k past int64, an option of
1e12 segments) would otherwise fail every request batched with it, or hold the engine. The ranges are
the model seam's: the shared fields' (models/base.py NUMERIC_BOUNDS) and the family's options, read from
the schema the family declares (models/options.py, `ModelProgram.option_schema`) by the one validator.
Each refusal is an InputError, one sentence naming the field and what it accepts."""

from __future__ import annotations

from typing import Any

from voxcli.models.base import SEED_MAX, InputError, SynthesisRequest, check_number, check_numbers
from voxcli.models.options import NO_OPTIONS, OptionSchema, validate_options

__all__ = ["SEED_MAX", "check_request", "check_seed"]


def check_seed(seed: Any, where: str = "seed") -> None:
    check_number(where, seed, "seed")


def check_request(request: SynthesisRequest, schema: OptionSchema = NO_OPTIONS,
                  model: str = "the model") -> None:
    """Raise InputError for a field no model could use, or an option `schema` does not take."""
    if not isinstance(request.text, str):
        raise InputError(f"text must be a string, got {type(request.text).__name__}")
    check_numbers(request)
    validate_options(schema, request.options, model)


def program_check(program: Any) -> Any:
    """A session's `check` for `program`: the shared checks above, then the model's own."""

    def check(request: SynthesisRequest) -> None:
        check_request(request, program.option_schema, f"model {program.spec.name}")
        program.check(request)

    return check
