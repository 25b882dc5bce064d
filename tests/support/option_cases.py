"""Hostile values for each option a schema declares (models/options.py): what no option of that kind may
take, so a front end must refuse it with a sentence naming the field. The fuzz suites and the schema test
read them from every family's `Family.options`, so a new option is thrown at without a new test.

Values are JSON texts (a request body carries them as written: NaN and Infinity are what Python's json
module reads and writes for them), each with a name for the test id."""

from __future__ import annotations

import json
from typing import Any

from voxcli.models.options import OptionSchema, OptionSpec

# JSON text -> what it is, for every kind: nothing a number, a flag or a choice may be
_HUGE = 10 ** 30
NUMBER_CASES: tuple[tuple[str, str], ...] = (
    ("1e300", "huge"), ("-1e300", "-huge"), (str(_HUGE), "huge-int"), (str(-_HUGE), "-huge-int"),
    (str(2 ** 64), "2^64"), ("1e-300", "tiny"), ("NaN", "nan"), ("Infinity", "inf"), ("-Infinity", "-inf"),
    ("true", "bool"), ('"abc"', "string"), ('"1"', "numeric-string"), ("[1]", "list"), ('{"a": 1}', "object"),
)
WHOLE_ONLY: tuple[tuple[str, str], ...] = (("2.5", "fraction"), ("1.0", "float-for-int"))
FLAG_CASES: tuple[tuple[str, str], ...] = (("1", "int"), ("0", "zero"), ('"true"', "string"),
                                           ("1e300", "huge"), ("NaN", "nan"), ("[true]", "list"))
CHOICE_CASES: tuple[tuple[str, str], ...] = (('"no-such-mode"', "unknown"), ('""', "empty"), ("1", "int"),
                                             ("true", "bool"), ("NaN", "nan"), ("1e300", "huge"))


def bad_values(spec: OptionSpec) -> tuple[tuple[str, str], ...]:
    """(JSON text, case name) pairs `spec` must refuse. A "whole" option also refuses a float; 1e-300 is
    refused by every range that does not hold it (a numeric range whose low end is above 0)."""
    if spec.kind == "bool":
        return FLAG_CASES
    if spec.kind == "choice":
        return CHOICE_CASES
    assert spec.range is not None
    cases = list(NUMBER_CASES)
    if spec.range.lo <= 1e-300 <= spec.range.hi and not spec.range.whole:
        cases = [c for c in cases if c[1] != "tiny"]  # in range: not hostile for this option
    if spec.kind == "whole":
        cases += WHOLE_ONLY
    return tuple(cases)


def option_cases(schema: OptionSchema) -> list[tuple[str, str, str]]:
    """(option name, JSON text, case name) for every option of `schema`, plus an option it does not have."""
    out = [(spec.name, text, case) for spec in schema for text, case in bad_values(spec)]
    out.append(("no_such_option", "1", "unknown-option"))
    return out


def parse(text: str) -> Any:
    """The value a JSON text holds (NaN/Infinity included), for front ends that take Python values."""
    return json.loads(text)
