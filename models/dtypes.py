"""One dtype policy for every family: the names `--dtype` takes, and per part of a model (its LM, its codec,
its conditioner, ...) whether the part follows the requested dtype or keeps a floor of its own.

A family declares its `DtypePolicy` once, as data, in its spec module (`DTYPE_POLICY`, beside its other
declared facts; the module its registered `describe` entry names); its loader asks the policy for each
part's dtype (`policy.torch_dtype("codec", dtype)`) and never decides one itself.
tests/test_dtype_policy.py loads every demo in float32 and bfloat16 and checks each part's tensors are in
the declared dtype, so a loader cannot drift from its family's declaration.

Imports no torch at module level: spec modules (and so `vox voices`, `vox models`) stay torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

DTYPE_NAMES: tuple[str, ...] = ("float32", "bfloat16", "float16", "float64")
# "At least" a dtype means the wider of it and the requested one (bfloat16 and float16 are both narrower
# than float32; neither is wider than the other).
_WIDTH = {"bfloat16": 16, "float16": 16, "float32": 32, "float64": 64}
# What most families load in; float64 only where a family's exactness checks ask for it.
HALF_AND_FULL: tuple[str, ...] = ("float32", "bfloat16", "float16")

FOLLOWS = "follows"  # the part runs in the requested dtype


def check_name(name: str, allowed: tuple[str, ...] = DTYPE_NAMES) -> str:
    """`name` when it is one of `allowed`; otherwise the one error every loader gives for a dtype name."""
    if name not in allowed:
        raise ValueError(f"dtype must be one of {', '.join(allowed)}, got {name!r}")
    return name


def torch_dtype(name: str, allowed: tuple[str, ...] = DTYPE_NAMES) -> torch.dtype:
    """The torch dtype a dtype name stands for (the one name -> dtype table is torch's own attribute)."""
    import torch

    dtype: torch.dtype = getattr(torch, check_name(name, allowed))
    return dtype


def dtype_name(dtype: torch.dtype) -> str:
    """`torch.bfloat16` -> "bfloat16": the name a loader taking a name is handed."""
    return check_name(str(dtype).removeprefix("torch."))


@dataclass(frozen=True)
class AtLeast:
    """A part that runs in `floor` whenever the requested dtype is narrower, and in the requested dtype
    when it is wider (float64, asked for by the exactness checks, is kept)."""

    floor: str

    def __post_init__(self) -> None:
        check_name(self.floor)

    def resolve(self, requested: str) -> str:
        return requested if _WIDTH[requested] > _WIDTH[self.floor] else self.floor

    def __str__(self) -> str:
        return f"at least {self.floor}"


FLOAT32_AT_LEAST = AtLeast("float32")


@dataclass(frozen=True)
class Fixed:
    """A part that runs in `dtype` whatever is requested (an encoder upstream only runs in float32)."""

    dtype: str

    def __post_init__(self) -> None:
        check_name(self.dtype)

    def resolve(self, requested: str) -> str:
        return self.dtype

    def __str__(self) -> str:
        return self.dtype


Rule = str | AtLeast | Fixed  # FOLLOWS, a floor or a fixed dtype


@dataclass(frozen=True)
class Part:
    """One part's rule and where its weights live in a loaded program: attribute paths from the program
    (`"weights"`, `"codec_model.net"`), each a module (or one tensor) whose floating weights are all in
    the part's dtype but those under another part's path (CosyVoice 3's f0 predictor inside its vocoder).
    A part the program loads on first use behind no public attribute (a clone's speaker encoder) has no
    paths."""

    rule: Rule
    modules: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.rule != FOLLOWS and not isinstance(self.rule, AtLeast | Fixed):
            raise ValueError(f"a part's rule is {FOLLOWS!r}, AtLeast(...) or Fixed(...), got {self.rule!r}")


@dataclass(frozen=True)
class DtypePolicy:
    """What each part of a family's model runs in for a requested dtype; `accepts`: the names the family
    loads in (a name outside it is refused before anything is read)."""

    parts: Mapping[str, Part]
    accepts: tuple[str, ...] = HALF_AND_FULL
    notes: Mapping[str, str] = field(default_factory=dict)  # why a part keeps a floor (the docs table)

    def check(self, requested: str) -> str:
        return check_name(requested, self.accepts)

    def name(self, part: str, requested: str, override: Mapping[str, str] | None = None) -> str:
        """The dtype name of `part` when the program is loaded in `requested`; `override` (part -> name)
        replaces a part's rule, for the exactness checks that run one part in float64."""
        self.check(requested)
        if override and part in override:
            return check_name(override[part])
        if part not in self.parts:
            raise KeyError(f"the dtype policy declares no part {part!r} (it has {', '.join(self.parts)})")
        rule = self.parts[part].rule
        return requested if rule == FOLLOWS else rule.resolve(requested)  # type: ignore[union-attr]

    def torch_dtype(self, part: str, requested: str, override: Mapping[str, str] | None = None
                    ) -> torch.dtype:
        return torch_dtype(self.name(part, requested, override))

