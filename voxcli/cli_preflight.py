"""What `vox say` and `vox batch` refuse from a model's name and its config files alone, before torch is
imported (seconds) and the model loads (more): a model name that names nothing (with "did you mean"),
a `--voice` or `--lang` the checkpoint does not have (with "did you mean", from the list its config
holds). Each refusal is one sentence and exit 2 (a usage mistake), in well under a second.

Only what the family's `describe` reads from config files is checked here; everything else about a
request is still the model's own `check` after it loads (the same lists, so the two never disagree).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from voxcli.errors import VoxError


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """` (did you mean X?)` for the closest of `choices` to `word` (case-insensitively), or ""."""
    by_lower = {c.lower(): c for c in choices}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    return f" (did you mean {by_lower[close[0]]}?)" if close else ""


def model_names() -> tuple[str, ...]:
    """Every name `-m` knows without a folder: the demo aliases and the families' hub ids."""
    from voxcli.models import registry

    return (*(d.name for d in registry.demos()), *(m.id for m in registry.hub_models()))


def check_model(source: str) -> None:
    """The model is a demo alias, an existing folder or a hub id in the local cache; otherwise one
    sentence (exit 2 for a name that names nothing, with the closest known name; exit 1 for a known
    hub id that is not downloaded yet: the command is right, the machine lacks the files)."""
    from voxcli.models_cmd import ensure_available

    try:
        ensure_available(source)
    except VoxError as e:
        known = model_names()
        hint = "" if source in known else did_you_mean(source, known)  # a known id only needs downloading
        names_nothing = "neither" in str(e) or "does not exist" in str(e)
        raise VoxError(f"{str(e).rstrip('.')}{hint}.", 2 if names_nothing else e.exit_code) from None


def describe(source: str) -> Any | None:
    """The model's spec from its config files alone (no torch), or None when its family cannot."""
    from voxcli.models import describe_config, registry

    if registry.find_demo(source) is not None and not demo_checkpoint_built(source):
        return None  # building the demo needs torch: its load checks the request soon after
    return describe_config(source)


def demo_checkpoint_built(name: str) -> bool:
    from voxcli.models import cache_dir, registry

    found = registry.find_demo(name)
    if found is None:
        return False
    stamp = cache_dir() / found[1].name / "VOX_DEMO_VERSION"
    return stamp.exists() and stamp.read_text().strip() == found[1].version


def check_voice_and_language(spec: Any, voice: str | None, language: str | None) -> None:
    """`voice` among the checkpoint's named voices and `language` among its languages (case-insensitive,
    "auto" always), each refused with the closest name and the list."""
    name = spec.name
    if voice is not None and not spec.catalog.kinds:  # every family refuses a voice it does not have
        raise VoxError(f"model {name} has no named voices (its modes: {', '.join(spec.modes) or 'none'}); "
                       "drop --voice.", 2)
    if voice is not None:
        check_voice(spec, voice)
    if language is not None and language.lower() != "auto" and spec.languages:
        known = {x.lower() for x in spec.languages}
        if language.lower() not in known:
            choices = ["auto", *(x for x in spec.languages if x.lower() != "auto")]
            raise VoxError(f"model {name} does not speak language {language!r}"
                           f"{did_you_mean(language, choices)}; choose one of {', '.join(choices)}.", 2)


def check_voice(spec: Any, voice: str) -> None:
    """The voice as the model will resolve it (models/voices.py): a name it lists or, from the command
    line, a voice file for a family that takes files (a released Kyutai checkpoint has no voices folder)."""
    from voxcli.models.voices import UnknownVoice, VoiceError

    try:
        spec.resolve_voice(voice, allow_paths=True)
    except UnknownVoice as e:
        if not voice.strip():
            raise VoxError(f"{e}.", 2) from None
        raise VoxError(f"model {e.model} has no voice {voice!r}{did_you_mean(voice, e.available)}; "
                       f"{e.choices}.", 2) from None
    except VoiceError as e:
        raise VoxError(f"{str(e).rstrip('.')}.", 2) from None


def check_clone(spec: Any) -> None:
    """A reference clip for a model that cannot clone: refused now, not after minutes of loading."""
    if not spec.clones:
        voices = f"; choose one of its voices ({', '.join(spec.voices)})" if spec.voices else ""
        raise VoxError(f"model {spec.name} cannot clone a voice from --ref-audio (its modes: "
                       f"{', '.join(spec.modes) or 'none'}){voices}; drop --ref-audio.", 2)


def preflight(model: str, voice: str | None, language: str | None, ref_audio: bool = False) -> None:
    """Everything above, for the model a `vox say` / `vox batch` will load."""
    check_model(model)
    if voice is None and language is None and not ref_audio:
        return
    spec = describe(model)
    if spec is not None:
        check_voice_and_language(spec, voice, language)
        if ref_audio:
            check_clone(spec)
