"""The fields of one speech request, checked once for every front end that takes them.

`vox say`/`vox batch` flags and `voxcli.load(...).say(...)` keywords carry the fields a JSONL batch
line carries (voice, lang, instructions, seed, cfg_scale, options) plus the sampling settings, the frame
cap and reference audio. Each check here raises `RequestFieldError` with one sentence that names the
field as the caller spelled it (`--seed` on the command line, `seed` in Python), before a model loads.
The model's own checks (a voice it has, a language it speaks) come later, from `ModelProgram.check`.
Imports stay light: numpy and soundfile only when reference audio is read.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from voxcli.errors import VoxError
from voxcli.models.base import SEED_MAX

if TYPE_CHECKING:
    from voxcli.models.base import SamplingParams


class RequestFieldError(VoxError, ValueError):
    """A request field with a value no model accepts; a usage mistake (exit code 2 on the command line)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, 2)


def check_seed(seed: Any, name: str = "seed") -> None:
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)
                             or not 0 <= seed <= SEED_MAX):
        shown = json.dumps(seed) if isinstance(seed, bool | float | str) else seed  # as a JSONL line has it
        raise RequestFieldError(f"{name} must be a whole number from 0 to {SEED_MAX}, got {shown}.")


def check_max_frames(max_frames: Any, name: str = "max_frames") -> None:
    if max_frames is not None and (isinstance(max_frames, bool) or not isinstance(max_frames, int)
                                   or max_frames < 1):
        raise RequestFieldError(f"{name} must be at least 1, got {max_frames}.")


def check_text_fields(fields: dict[str, Any]) -> None:
    """The JSONL line's typed fields (a `vox batch` line's and a Python call's alike): strings, a number for
    cfg_scale, an object for options."""
    for name in ("voice", "lang", "language", "instructions", "ref_text"):
        if fields.get(name) is not None and not isinstance(fields[name], str):
            raise RequestFieldError(f"{name} must be a string.")
    cfg_scale = fields.get("cfg_scale")
    if cfg_scale is not None and (isinstance(cfg_scale, bool) or not isinstance(cfg_scale, int | float)):
        raise RequestFieldError("cfg_scale must be a number (1 = no guidance).")
    options = fields.get("options")
    if options is not None and not isinstance(options, dict):
        raise RequestFieldError("options must be an object of the model's options.")


def sampling_params(greedy: bool = False, temperature: float | None = None, top_k: int | None = None,
                    top_p: float | None = None, repetition_penalty: float | None = None,
                    prefix: str = "") -> SamplingParams:
    """Checked sampling settings; `prefix` spells the field names as the caller does ("--" for flags)."""
    from voxcli.models.base import SamplingParams

    for name, value, hi in (("temperature", temperature, None), ("top-p", top_p, 1.0),
                            ("repetition-penalty", repetition_penalty, None)):
        if value is not None and not (math.isfinite(value) and value > 0 and (hi is None or value <= hi)):
            upper = f" and at most {hi:g}" if hi is not None else ""
            raise RequestFieldError(f"{_spell(name, prefix)} must be a finite number above 0{upper}, got "
                                    f"{value}.")
    if top_k is not None and top_k < 0:
        raise RequestFieldError(f"{_spell('top-k', prefix)} must be >= 0 (0 turns the top-k filter off), got "
                                f"{top_k}.")
    return SamplingParams(greedy=greedy, temperature=temperature, top_k=top_k, top_p=top_p,
                          repetition_penalty=repetition_penalty)


def _spell(name: str, prefix: str) -> str:
    return f"{prefix}{name}" if prefix else name.replace("-", "_")


def read_ref_audio(path: Path | str | None, name: str = "ref_audio") -> tuple[Any, int | None]:
    """A recording of the voice to clone -> (mono float32 samples, sample rate); (None, None) for none."""
    if path is None:
        return None, None
    import soundfile as sf

    path = Path(path)
    if not path.exists():  # soundfile would say "System error."
        raise RequestFieldError(f"{name} {path} does not exist; give a WAV/FLAC/OGG recording of the voice.")
    if path.is_dir():
        raise RequestFieldError(f"{name} {path} is a directory; give a WAV/FLAC/OGG recording of the voice.")
    try:
        data, sr = sf.read(str(path), dtype="float32", always_2d=True)
    except (OSError, RuntimeError) as e:  # soundfile raises LibsndfileError (a RuntimeError)
        raise RequestFieldError(f"cannot read reference audio {path}: {e}; give a WAV/FLAC/OGG "
                                "file.") from None
    if data.size == 0:
        raise RequestFieldError(f"reference audio {path} is empty; give a few seconds of speech.")
    return check_ref_samples(data.mean(axis=1), int(sr), str(path))


def check_ref_samples(samples: Any, sample_rate: int, what: str = "ref_audio") -> tuple[Any, int]:
    """Reference audio given as samples: mono float32, finite, non-empty."""
    import numpy as np

    data = np.ascontiguousarray(np.asarray(samples, dtype=np.float32).reshape(-1))
    if data.size == 0:
        raise RequestFieldError(f"reference audio {what} is empty; give a few seconds of speech.")
    if not np.isfinite(data).all():
        raise RequestFieldError(f"reference audio {what} holds NaN or infinite samples; give a clean "
                                "recording.")
    if isinstance(sample_rate, bool) or not isinstance(sample_rate, int) or sample_rate < 1:
        raise RequestFieldError(f"the sample rate of reference audio {what} must be a positive whole number, "
                                f"got {sample_rate}.")
    return data, sample_rate
