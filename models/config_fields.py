"""Reading config.json fields the way every transformers version writes them, for the families' parsers.

What differs in the wild (transformers 4.5x vs 5.x `save_pretrained`, see tests/fixtures/configs/):
- absent keys and explicit `null`s both mean "the default" (5.x writes `"bos_token_id": null` at the top
  of an encoder-decoder config and moves the value into the decoder's sub-config);
- RoPE: 4.5x writes `rope_theta` (+ `rope_scaling`), 5.x writes `rope_parameters: {rope_type, rope_theta,
  ...}` and may drop the top-level `rope_theta`;
- token ids may be a one-element list.
A value of the wrong kind is a CheckpointError naming the key and the file, never a TypeError.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .base import CheckpointError

MISSING: Any = object()


def _present(d: Mapping[str, Any], key: str) -> bool:
    return d.get(key) is not None


def _bad(where: str, key: str, value: Any, expected: str) -> CheckpointError:
    return CheckpointError(f"{where}: {key} is {value!r}, expected {expected}")


def get_int(d: Mapping[str, Any], key: str, default: Any, where: str) -> int:
    """An integer field (bools and fractional floats refused); absent or null -> `default`
    (MISSING: the field is required)."""
    if not _present(d, key):
        if default is MISSING:
            raise CheckpointError(f"{where} has no field {key!r}")
        return default
    v = d[key]
    if isinstance(v, list) and len(v) == 1:  # token ids: [id] means id
        v = v[0]
    if isinstance(v, bool) or not isinstance(v, int | float) or (isinstance(v, float) and not v.is_integer()):
        raise _bad(where, key, d[key], "an integer")
    return int(v)


def get_float(d: Mapping[str, Any], key: str, default: Any, where: str) -> float:
    if not _present(d, key):
        if default is MISSING:
            raise CheckpointError(f"{where} has no field {key!r}")
        return default
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise _bad(where, key, v, "a finite number")
    return float(v)


def get_dict(d: Mapping[str, Any], key: str, where: str, required: bool = False) -> dict[str, Any]:
    v = d.get(key)
    if v is None:
        if required:
            raise CheckpointError(f"{where} has no field {key!r}")
        return {}
    if not isinstance(v, dict):
        raise _bad(where, key, v, "an object")
    return v


def first_int(sources: list[tuple[Mapping[str, Any], str]], key: str, default: int) -> int:
    """The first non-null `key` among (dict, where) sources (e.g. the top level, then a sub-config)."""
    for d, where in sources:
        if _present(d, key):
            return get_int(d, key, default, where)
    return default


def rope_theta(d: Mapping[str, Any], default: float, where: str,
               allowed_extra: tuple[str, ...] = ()) -> float:
    """The RoPE base of one attention stack, from `rope_theta` (4.5x) or `rope_parameters` (5.x), after
    checking that the RoPE is plain (rope_type "default"). `allowed_extra`: keys of the RoPE dict that
    leave it plain for this family (Qwen3-TTS's `mrope_section`/`interleaved`: its three position axes are
    always equal, so it is 1-D RoPE)."""
    params = None
    for key in ("rope_parameters", "rope_scaling"):
        v = d.get(key)
        if v in (None, {}):
            continue
        if not isinstance(v, dict):
            raise _bad(where, key, v, "an object")
        params = (key, v)
        break
    theta = get_float(d, "rope_theta", None, where)
    if params is not None:
        key, p = params
        kind = p.get("rope_type", p.get("type", "default"))
        extra = set(p) - {"rope_type", "type", "rope_theta", *allowed_extra}
        if kind != "default" or extra:
            raise CheckpointError(f"{where}: {key} {p!r} is not supported (plain RoPE only: rope_type "
                                  "'default')")
        inner = get_float(p, "rope_theta", None, f"{where} {key}")
        if inner is not None and theta is not None and inner != theta:
            raise CheckpointError(f"{where}: rope_theta {theta:g} and {key}.rope_theta {inner:g} disagree")
        theta = inner if inner is not None else theta
    return default if theta is None else theta
