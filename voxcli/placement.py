"""`--placement`: which role each GPU (replica) of a scale-out has (`vox serve`, `vox batch`).

    both=1,lm=2,codec=1    one replica running both stages, two LM-only replicas sharing one codec-only one
    auto                   the best placement `vox profile --gpus N --no-simulate` ranks for the model and
                           workload over N GPUs (N = --replicas), from the throughput model
                           (voxcli/sim/placement_rank.py; this module only reads the flag)

A group of LM-only replicas shares the codec-only replicas (each request's chunks go to one of them), so
LM-only and codec-only come together or not at all. Counts are ASCII digits. Parse errors are one sentence
naming the flag, before anything loads; whether the counts fit the Ray cluster is `voxcli.cluster.fit`'s
check, before anything is deployed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from voxcli.errors import VoxError

ROLE_NAMES = ("both", "lm", "codec")
_ASCII_COUNT = re.compile(r"[0-9]{1,18}")  # bounded digits; what fits the cluster is checked later
ACCEPTED = "role=count pairs over both, lm, codec (e.g. both=1,lm=2,codec=1), or auto"


@dataclass(frozen=True)
class Placement:
    both: int = 0
    lm: int = 0
    codec: int = 0

    @property
    def replicas(self) -> int:
        return self.both + self.lm + self.codec

    def describe(self) -> str:
        return ",".join(f"{name}={n}" for name, n in zip(ROLE_NAMES, (self.both, self.lm, self.codec),
                                                          strict=True) if n)


def _bad(text: str, why: str) -> VoxError:
    return VoxError(f"--placement {text!r} {why}; give {ACCEPTED}.", 2)


def parse_placement(text: str) -> Placement | None:
    """The placement `text` names, or None for `auto` (resolved later by voxcli/sim/placement_rank.py)."""
    raw = text.strip()
    if raw == "auto":
        return None
    counts: dict[str, int] = {}
    for part in (p.strip() for p in raw.split(",")):
        name, eq, value = part.partition("=")
        name = name.strip()
        if not eq or name not in ROLE_NAMES:
            raise _bad(text, f"has {part!r}, which is not role=count")
        if name in counts:
            raise _bad(text, f"names {name} twice")
        digits = value.strip()
        if digits.startswith("-") and _ASCII_COUNT.fullmatch(digits[1:]):
            raise _bad(text, f"gives {name} a negative count")
        # ASCII digits only: int() also reads "1_0" as 10 and other scripts' digits ("١") as theirs
        if not _ASCII_COUNT.fullmatch(digits):
            raise _bad(text, f"gives {name} the count {digits!r}, not a whole number in ASCII digits")
        counts[name] = int(digits)
    p = Placement(**counts)
    if p.replicas < 1:
        raise _bad(text, "places no replica")
    if (p.lm > 0) != (p.codec > 0):
        raise _bad(text, "has LM-only replicas without a codec-only one or the other way round (they "
                         "serve together)")
    return p
