"""OpenAI voice names -> the served model's voices (`vox serve --voice-map`).

OpenAI client code always sends a `voice`, one of OpenAI's names (alloy, ash, ...). The served model has
voices of its own (Qwen3-TTS CustomVoice: vivian, serena, ryan...; Dia, Base and VoiceDesign models: none,
their voice comes from the text, a reference clip or instructions). The default table maps each OpenAI
name to the first of its preferred voices that the model has (the families' `Family.openai_voices`,
chosen by the OpenAI voice's character: female / male, deep, bright); on a model without named voices
every OpenAI name means the model's default voice. A name the model has itself always means the model's
own voice. `--voice-map alloy=ryan` (repeatable, or comma-separated) overrides entries, `NAME=default`
maps a name to the model's default voice and `--voice-map off` turns the table off (OpenAI names then get
the model's 400 listing its voices).
GET /v1/audio/voices shows the table in force.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from voxcli.errors import VoxError
from voxcli.models.registry import openai_voice_preferences

# OpenAI voice -> preferred voices, best first: each family's `Family.openai_voices` (models/*/family.py;
# Qwen3-TTS CustomVoice maps them to its nine speakers, the families without named voices map none).
DEFAULT_PREFERENCES: dict[str, tuple[str, ...]] = openai_voice_preferences()
# OpenAI's voice names (its speech API's `voice` values)
OPENAI_VOICES = ("alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer",
                 "verse")
DEFAULT = "default"  # --voice-map NAME=default: the model's own default voice


def default_table(model_voices: Sequence[str]) -> dict[str, str | None]:
    """Each OpenAI name -> the model voice it means (None: the model's default voice). A name whose
    preferred speakers the model lacks is left out (it gets the model's 400 that lists the voices)."""
    have = {v.lower() for v in model_voices}
    if not have:
        return dict.fromkeys(OPENAI_VOICES)
    table: dict[str, str | None] = {}
    for name in OPENAI_VOICES:
        preferred = DEFAULT_PREFERENCES.get(name, ())
        pick = next((v for v in preferred if v in have), None)
        if pick is not None:
            table[name] = pick
    return table


def parse_voice_map(items: Iterable[str], model_voices: Sequence[str]) -> dict[str, str | None]:
    """`--voice-map` values over the default table; every target must be a voice of the model."""
    items = [part.strip() for item in items for part in item.split(",") if part.strip()]
    if items == ["off"]:
        return {}
    table = default_table(model_voices)
    have = {v.lower(): v for v in model_voices}
    for item in items:
        name, sep, target = item.partition("=")
        name, target = name.strip().lower(), target.strip()
        if not sep or not name or not target:
            raise VoxError(f"--voice-map {item!r}: use NAME=VOICE (e.g. alloy=ryan), NAME=default or off.", 2)
        if target.lower() == DEFAULT:
            table[name] = None
        elif target.lower() in have:
            table[name] = target.lower()
        else:
            choices = ", ".join(model_voices) if model_voices else f"none: use {name}={DEFAULT}"
            raise VoxError(f"--voice-map {item}: the model has no voice {target!r} (its voices: {choices}).",
                           2)
    return table


def table_for(service: Any) -> Mapping[str, str | None]:
    """The table in force for a SpeechService: set by `vox serve --voice-map`, else the default."""
    table = getattr(service, "voice_map", None)
    return default_table(service.spec.voices) if table is None else table


def map_voice(voice: str | None, table: Mapping[str, str | None], model_voices: Sequence[str]) -> str | None:
    """The voice a request's `voice` means: the model's own name as is, else the table's entry, else
    unchanged (the model's check then answers with the voices it has)."""
    if voice is None or voice.lower() in {v.lower() for v in model_voices}:
        return voice
    key = voice.strip().lower()
    return table[key] if key in table else voice
