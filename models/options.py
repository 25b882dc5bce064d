"""Request options by construction: every option a family takes, and every shared request field, is
declared once here or in the family's own `options.py`, and one validator reads the declaration.

    OptionSpec(name, kind, help, default, range, choices)   one option: what it is, what it may hold
    OptionSchema(specs)                                      a family's options (`Family.options`,
                                                             `ModelProgram.option_schema`)
    REQUEST_FIELDS                                           the shared numeric fields (NUMERIC_BOUNDS)
    validate_options(schema, options, model)                 the one validator: a checked dict, or
                                                             InputError naming the field

Kinds: "number" (int or float, finite, inside `range`), "whole" (int, not bool, inside `range`), "bool"
(true/false only) and "choice" (one of `choices`). A bool is never a number and a float is never a whole
number, whatever Python thinks; NaN, inf and anything outside the range are refused. Every bound is
what the stages can compute with (models/base.py NumberRange), so a request's options can never make a
batch raise, allocate without bound, or loop without bound. Each refusal is one sentence naming the
option as `options.<name>` and what it accepts. Nothing here imports torch or numpy.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .bounds import NUMERIC_BOUNDS, NumberRange
from .errors import InputError

Kind = Literal["number", "whole", "bool", "choice"]


@dataclass(frozen=True)
class OptionSpec:
    """One option: its name, kind, what it means, its default (None: the checkpoint's own) and what it
    may hold (`range` for numbers, `choices` for a choice)."""

    name: str
    kind: Kind
    help: str
    default: Any = None
    range: NumberRange | None = None
    choices: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind in ("number", "whole") and self.range is None:
            raise ValueError(f"option {self.name} is a {self.kind} and needs a range")
        if self.kind == "whole" and self.range is not None and not self.range.whole:
            raise ValueError(f"option {self.name} is whole but its range is not")
        if self.kind == "choice" and not self.choices:
            raise ValueError(f"option {self.name} is a choice and needs choices")

    def accepts(self) -> str:
        """What a value must be, as the end of a sentence ("a whole number from 1 to 64")."""
        if self.kind == "bool":
            return "true or false"
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        r = self.range
        assert r is not None
        if r.whole:
            return f"a whole number from {r.lo:d} to {r.hi:d}"
        low = f"above {r.lo:g} and at most" if r.lo_open else f"from {r.lo:g} to"
        return f"a finite number {low} {r.hi:g}"

    def check(self, value: Any, field: str) -> Any:
        """`value` if it is what this option takes, else InputError naming `field`."""
        ok = True
        if self.kind == "bool":
            ok = isinstance(value, bool)
        elif self.kind == "choice":
            ok = isinstance(value, str) and value in self.choices
        else:
            assert self.range is not None
            try:
                self.range.check(field, value)
            except InputError:
                ok = False
        if not ok:
            raise InputError(f"{field} must be {self.accepts()}, got {_shown(value)}.")
        return value

    def describe(self) -> str:
        """One line for `vox voices`, `--help` and error messages."""
        default = "" if self.default is None else f"; default {_shown(self.default)}"
        return f"{self.name}: {self.accepts()}{default}. {self.help}"


@dataclass(frozen=True)
class OptionSchema:
    """A family's options, in the order `vox voices` lists them."""

    specs: tuple[OptionSpec, ...] = ()

    def __post_init__(self) -> None:
        names = [s.name for s in self.specs]
        if len(set(names)) != len(names):
            raise ValueError(f"an option schema names an option twice: {names}")

    def __iter__(self) -> Iterator[OptionSpec]:
        return iter(self.specs)

    def __len__(self) -> int:
        return len(self.specs)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.specs)

    def get(self, name: str) -> OptionSpec | None:
        return next((s for s in self.specs if s.name == name), None)

    def describe(self) -> list[str]:
        return [s.describe() for s in self.specs]


def validate_options(schema: OptionSchema, options: Any, model: str = "this model") -> dict[str, Any]:
    """THE validator of a request's `options`: an object whose keys the schema names and whose values
    each option takes; returns the options with every absent one at its default (None: the
    checkpoint's). Raises InputError, one sentence naming the field, for anything else."""
    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise InputError(f"options must be an object of {model}'s options, got {_shown(options)}.")
    for key in options:
        if not isinstance(key, str) or schema.get(key) is None:
            takes = f"its options are {', '.join(schema.names)}" if len(schema) else "it takes no options"
            raise InputError(f"{model} has no option {key!r}; {takes} (see vox voices).")
    out: dict[str, Any] = {}
    for spec in schema:
        value = options.get(spec.name)
        out[spec.name] = spec.default if value is None else spec.check(value, f"options.{spec.name}")
    return out


def shared(name: str, help: str, default: Any = None, kind: str | None = None) -> OptionSpec:
    """A family option that takes a shared field's range (Qwen3-TTS's sub_temperature is a temperature)."""
    bound = NUMERIC_BOUNDS[kind or kind_of(name)]
    return OptionSpec(name, "whole" if bound.whole else "number", help, default, bound)


def kind_of(name: str) -> str:
    """The NUMERIC_BOUNDS entry an option named after a shared field takes (`sub_top_k` -> `top_k`)."""
    for key in sorted(NUMERIC_BOUNDS, key=len, reverse=True):
        if name == key or name.endswith("_" + key):
            return key
    raise KeyError(f"no shared bound fits option {name}")


# The shared request fields (models/base.py NUMERIC_BOUNDS holds their ranges; this adds what they mean),
# checked for every family by `check_numbers` before its own `check`.
REQUEST_FIELDS = OptionSchema(tuple(
    OptionSpec(name, "whole" if NUMERIC_BOUNDS[name].whole else "number", help, None, NUMERIC_BOUNDS[name])
    for name, help in (
        ("temperature", "Sampling temperature of the audio tokens."),
        ("top_k", "Keep the k most likely audio tokens (0 = no top-k filter)."),
        ("top_p", "Keep the most likely audio tokens up to this probability mass."),
        ("repetition_penalty", "Penalty on repeated audio tokens (1 = none)."),
        ("seed", "Seed of the request's random draws (the same seed gives the same audio)."),
        ("max_frames", "Most audio frames the request may produce."),
        ("fixed_frames", "Exactly this many frames (benchmarks and tests only)."),
        ("cfg_scale", "Classifier-free guidance scale (1 = no guidance)."),
        ("ref_sample_rate", "Sample rate of the reference audio, in Hz."),
    )))
assert set(REQUEST_FIELDS.names) == set(NUMERIC_BOUNDS), "every shared bound has its description"
NO_OPTIONS = OptionSchema()


def _shown(value: Any) -> str:
    """A value as a JSON request has it (true, "abc", 1e+300), short."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = repr(value)
    else:
        text = repr(value) if isinstance(value, int | float) else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."
