"""Request -> Dia prompt: validation (one sentence per mistake), text ids, optional audio prompt.

Voice clone, as the reference does it: the clip's transcript goes in front of the text
(plain concatenation `ref_text + text`, as Nari Labs' voice-clone example does), and the clip's DAC
codes become the decoder's prefix (delayed like every other frame, see delay.py). Only the generated
part is returned as audio.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..base import InputError, SynthesisRequest, check_numbers
from ..options import NO_OPTIONS, validate_options
from .config import DiaConfig, GenerationDefaults
from .sampling import RowSampling
from .tokenizer import encode

LANGUAGES = ("english",)


@dataclass
class PreparedDia:
    ids: list[int]  # conditional text ids (the unconditional sequence uses zeros of the same length)
    codes: np.ndarray | None  # audio prompt [T, C] (voice clone) or None
    sampling: RowSampling
    seed: int | None


def resolve_sampling(gen: GenerationDefaults, req: SynthesisRequest) -> RowSampling:
    p = req.sampling
    if p.repetition_penalty not in (None, 1.0):
        raise InputError("Dia has no repetition penalty; leave repetition_penalty unset")
    w = gen.guidance_scale if req.cfg_scale is None else req.cfg_scale
    w = 1.0 if w is None else float(w)
    if not w >= 1.0:
        raise InputError(f"cfg_scale must be >= 1 (1 = no guidance), got {w}")
    rs = RowSampling(
        greedy=p.greedy or not gen.do_sample,
        temperature=gen.temperature if p.temperature is None else p.temperature,
        top_k=gen.top_k if p.top_k is None else p.top_k,
        top_p=gen.top_p if p.top_p is None else p.top_p,
        guidance=w,
    )
    if rs.temperature <= 0:
        raise InputError(
            f"sampling temperature must be > 0 (use greedy for deterministic output), got {rs.temperature}"
        )
    if not 0 < rs.top_p <= 1:
        raise InputError(f"sampling top_p must be in (0, 1], got {rs.top_p}")
    if rs.top_k is not None and rs.top_k < 0:
        raise InputError(f"sampling top_k must be >= 0 (0 = off), got {rs.top_k}")
    return rs


def validate(cfg: DiaConfig, req: SynthesisRequest, text: str) -> list[int]:
    if not req.text or not req.text.strip():
        raise InputError("the text is empty")
    check_numbers(req)  # the shared ranges (models/base.py NUMERIC_BOUNDS); cfg_scale >= 1 below
    if req.voice:
        raise InputError(
            f"Dia has no named voices (got voice {req.voice!r}); pick a speaker with [S1]/[S2] in the text "
            "or clone one with --ref-audio and --ref-text"
        )
    if req.language not in (None, "auto") and req.language.lower() not in LANGUAGES + ("en",):
        raise InputError(f"Dia speaks English only; language must be auto or english, got {req.language!r}")
    if req.instructions:
        raise InputError("Dia takes no instructions; describe delivery in the text, e.g. (laughs)")
    validate_options(NO_OPTIONS, req.options, "Dia")  # the one validator: Dia takes no options
    if req.ref_audio is not None and not (req.ref_text and req.ref_text.strip()):
        raise InputError("voice clone with Dia needs --ref-text: the transcript of the reference clip")
    if req.ref_audio is None and req.ref_text:
        raise InputError("--ref-text needs --ref-audio (the clip it transcribes)")
    ids = encode(text)
    limit = cfg.encoder.max_position_embeddings
    if len(ids) > limit:
        raise InputError(f"the text is {len(ids)} bytes long; Dia reads at most {limit} (split it)")
    return ids


def clone_text(ref_text: str, text: str) -> str:
    return ref_text + text
