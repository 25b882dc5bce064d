"""The ranges of the numeric request fields every family shares (`NUMERIC_BOUNDS`), and `NumberRange`,
what a family's numeric options are declared with (models/options.py). models/base.py re-exports them."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .errors import InputError


@dataclass(frozen=True)
class NumberRange:
    """The values a numeric request field may take: what the stages can compute with. Sampling runs in
    float32 on logits of magnitude up to ~1e4, so a temperature or penalty outside [1e-3, 1e3] makes
    inf/NaN scores (then codes outside the codebook, which the codec refuses); counts and seeds become
    int64 tensors (a seed: torch.Generator.manual_seed), so they stay in int32 / int63 ranges."""

    lo: float
    hi: float
    whole: bool = False  # integers only (bool is refused although Python counts it as an int)
    lo_open: bool = False  # lo itself is excluded
    hint: str = ""  # what the user should know about the field, e.g. "0 = no top-k filter"

    def check(self, name: str, value: Any) -> None:
        """Raise InputError naming `name` and the accepted range unless `value` is None or in range."""
        if value is None:
            return
        if self.whole:
            ok = isinstance(value, int) and not isinstance(value, bool) and self.lo <= value <= self.hi
            what = f"a whole number from {self.lo:d} to {self.hi:d}"
        else:
            ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) \
                and (value > self.lo if self.lo_open else value >= self.lo) and value <= self.hi
            low = f"above {self.lo:g} and at most" if self.lo_open else f"from {self.lo:g} to"
            what = f"a finite number {low} {self.hi:g}"
        if not ok:
            hint = f" ({self.hint})" if self.hint else ""
            raise InputError(f"{name} must be {what}{hint}, got {value!r}")


INT32_MAX = 2**31 - 1
SEED_MAX = 2**63 - 1  # torch.Generator.manual_seed takes a signed or unsigned 64-bit value: stay in both
# Every family checks its numeric fields against these (one place; a family may narrow a range, e.g. Dia's
# cfg_scale >= 1, never widen it). Family options reuse them: Qwen's sub_temperature is a temperature.
NUMERIC_BOUNDS: dict[str, NumberRange] = {
    "temperature": NumberRange(1e-3, 1e3, hint="use greedy for deterministic output"),
    "top_k": NumberRange(0, INT32_MAX, whole=True, hint="0 = no top-k filter"),
    "top_p": NumberRange(0.0, 1.0, lo_open=True),
    "repetition_penalty": NumberRange(1e-3, 1e3, hint="1 = no penalty"),
    "seed": NumberRange(0, SEED_MAX, whole=True),
    "max_frames": NumberRange(1, INT32_MAX, whole=True),
    "fixed_frames": NumberRange(0, INT32_MAX, whole=True),  # 0: a request with no audio (tests, the sim)
    "cfg_scale": NumberRange(0.0, 100.0, hint="1 = no guidance"),
    "ref_sample_rate": NumberRange(1, 10**6, whole=True),
}


