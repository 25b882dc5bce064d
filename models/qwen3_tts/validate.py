"""Request validation for Qwen3-TTS: every refusal is an InputError with a sentence for the user.

Where the reference silently ignores something (instructions on the 0.6B CustomVoice, a speaker on a
Base model...) we refuse instead, so a user never gets audio that quietly ignored part of the request.
Everything here is cheap (no tokenizing, no audio encoding): `Qwen3TTSProgram.check` runs it before any
work, and `prepare` runs it again as its first step.

Family options (`SynthesisRequest.options`, declared in options.py): the depth transformer's ("sub-talker")
sampling, separately from the talker's, and the text mode. Unknown keys and wrong types are refused.
Qwen3-TTS has no classifier-free guidance: `cfg_scale` must be unset or 1.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ..base import InputError, SynthesisRequest, check_numbers
from ..options import validate_options
from ..voices import VoiceCatalog, resolve_voice
from .config import Qwen3TTSConfig
from .options import OPTIONS

REF_SAMPLE_RATE = 24000


@dataclass(frozen=True)
class QwenOptions:
    """Qwen3-TTS request options; None = the checkpoint's default (generation_config.json)."""

    sub_greedy: bool | None = None  # depth transformer: greedy (None: greedy when `sampling.greedy`)
    sub_temperature: float | None = None  # > 0
    sub_top_k: int | None = None  # >= 0; 0 = no top-k filter (as `top_k`)
    sub_top_p: float | None = None  # in (0, 1]
    streaming_text: bool | None = None  # text fed as generation goes (default: Base models only)


assert set(OPTIONS.names) == {f.name for f in fields(QwenOptions)}  # declared once: options.py


def parse_options(options: Mapping[str, Any] | None) -> QwenOptions:
    """The request's options through the one validator (models/options.py), typed."""
    return QwenOptions(**validate_options(OPTIONS, options, "Qwen3-TTS"))


def check_cfg_scale(scale: float | None) -> None:
    if scale is not None and scale != 1:
        raise InputError(f"Qwen3-TTS has no classifier-free guidance: leave cfg_scale unset or 1, "
                         f"got {scale}")


@dataclass(frozen=True)
class Validated:
    speaker: str | None  # CustomVoice speaker name (lowercase)
    language_id: int | None  # None = auto
    instructions: bool
    streaming: bool  # text mode: streaming text (True) or the whole text up front (False)
    icl: bool  # Base: in-context clone (reference transcript given) vs x-vector only
    options: QwenOptions


def validate_request(
    cfg: Qwen3TTSConfig, req: SynthesisRequest, has_injected_clone: bool = False, model: str = "this model"
) -> Validated:
    """`model` names the model in messages (the name the user gave, e.g. "demo")."""
    tc = cfg.talker
    kind = cfg.model_type
    if not isinstance(req.text, str) or not req.text.strip():
        raise InputError("the text to speak is empty; give some words to synthesise")
    check_numbers(req)
    options = parse_options(req.options)
    check_cfg_scale(req.cfg_scale)

    speaker: str | None = None
    if kind == "custom_voice":
        voice = (req.voice or "").strip()
        speakers = VoiceCatalog(speakers=tuple(sorted(tc.speaker_ids)))
        speaker = (resolve_voice(voice, speakers, allow_paths=req.voice_paths, model=model).name if voice
                   else speakers.speakers[0])
    elif req.voice:
        what = "voice cloning from reference audio" if kind == "base" else "voice design from instructions"
        raise InputError(
            f"this {kind} model has no named voices (it does {what}); drop the voice {req.voice!r}"
        )

    lang = (req.language or "auto").strip().lower()
    if lang not in cfg.languages:
        raise InputError(f"model {model} does not speak language {req.language!r}; choose one of "
                         f"{', '.join(cfg.languages)}")
    language_id = None if lang == "auto" else tc.language_ids[lang]
    if speaker is not None and lang in ("chinese", "auto"):
        dialect = tc.speaker_dialect.get(speaker, False)
        if dialect:  # dialect speakers speak their dialect when the language is Chinese or auto
            language_id = tc.language_ids[str(dialect)]

    instructions = bool(req.instructions and req.instructions.strip())
    if instructions and not cfg.supports_instructions:
        if kind == "custom_voice":
            raise InputError(
                "this CustomVoice model (0.6B) does not follow instructions; drop them, or use the "
                "1.7B CustomVoice or the VoiceDesign model"
            )
        raise InputError(
            f"this {kind} model does not take instructions; drop them or use a VoiceDesign model"
        )
    if kind == "voice_design" and not instructions:
        instructions = False  # allowed: the reference treats an empty instruction as none

    icl = False
    if kind == "base":
        if not has_injected_clone:
            _check_reference_audio(req)
        icl = req.ref_text is not None and bool(req.ref_text.strip())
        if req.ref_text is not None and not req.ref_text.strip():
            raise InputError(
                "the reference transcript (ref_text) is empty; give the words spoken in the reference "
                "clip, or leave it out for x-vector-only cloning"
            )
    elif req.ref_audio is not None or req.ref_text is not None:
        raise InputError(
            f"this {kind} model does not clone voices from reference audio; use a Base model "
            "(e.g. Qwen/Qwen3-TTS-12Hz-0.6B-Base, a download; offline, a random-weight one: "
            "python scripts/make_tiny.py OUT --family qwen3_tts --variant base, then -m OUT) or drop the "
            "reference"
        )

    streaming = options.streaming_text if options.streaming_text is not None else kind == "base"
    return Validated(speaker, language_id, instructions, bool(streaming), icl, options)


def _check_reference_audio(req: SynthesisRequest) -> None:
    if req.ref_audio is None:
        raise InputError(
            "voice cloning needs a reference recording (ref_audio): a mono clip of the voice"
        )
    wav = np.asarray(req.ref_audio)
    if wav.ndim != 1:
        raise InputError(f"the reference audio must be mono (one channel), got an array of shape {wav.shape}")
    if wav.size == 0:
        raise InputError("the reference audio is empty; give a clip of a few seconds of the voice to clone")
    if req.ref_sample_rate is None or req.ref_sample_rate <= 0:
        raise InputError("the reference audio needs its sample rate (ref_sample_rate)")
    # a clip at another rate is resampled to REF_SAMPLE_RATE in prepare (reference_clip), as every
    # family does
    if not np.isfinite(wav).all():
        raise InputError("the reference audio contains NaN or infinite samples")


def reference_clip(req: SynthesisRequest) -> np.ndarray:
    """The request's reference clip at REF_SAMPLE_RATE (resampled when recorded at another rate, as the
    other families do), float32 mono."""
    wav = np.asarray(req.ref_audio, dtype=np.float32).reshape(-1)
    rate = int(req.ref_sample_rate or REF_SAMPLE_RATE)
    if rate == REF_SAMPLE_RATE:
        return wav
    import torch

    from ..audio.resample import resample

    return resample(torch.from_numpy(wav), rate, REF_SAMPLE_RATE).numpy()
