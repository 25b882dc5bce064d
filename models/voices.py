"""One voice resolver for every family: a request's `voice` string -> a typed `ResolvedVoice`.

A family declares what voices it takes as a `VoiceCatalog` (its spec carries it): named speakers its
checkpoint declares (Qwen3-TTS's speaker ids, CosyVoice's spk2info.pt keys, CSM's 0..9...) and/or saved
embedding files found by name in voice folders (Kyutai's `*.safetensors`, Zonos' `speakers/*.npy`). The
folders are, in order: the checkpoint's own folder, a configured folder (`$VOX_VOICES_DIR`) and, only when
the checkpoint has no folder, the family's hub repository in the Hugging Face cache (Kyutai's released
checkpoint ships none: its voices are kyutai/tts-voices).

A file path is a voice only when the caller says so (`allow_paths`: the CLI and the Python API, whose user
owns the machine). Over the network a voice is a NAME: a name that could reach outside its folder (`..`,
absolute, a backslash, an empty part) is refused before any file is opened, and a found file whose real
path (symlinks followed) leaves the folder's boundary is refused too. No torch: `vox voices` and the CLI's
preflight resolve from file names alone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from .errors import InputError

# The configured voices folder (any family's files, each family picks its own suffix from it).
VOICES_DIR_ENV = "VOX_VOICES_DIR"
LEGACY_VOICES_DIR_ENV = "VOX_KYUTAI_VOICES"  # the name the Kyutai family read before the one resolver
SHOWN_NAMES = 10  # an error lists this many names, then how many more there are


class VoiceKind(StrEnum):
    SPEAKER = "speaker"  # a name the checkpoint declares (config, speaker table)
    EMBEDDING = "embedding"  # a saved embedding file, by its name inside a voices folder
    FILE = "file"  # an embedding file by its path (a local front end only)


class VoiceError(InputError):
    """A voice the model cannot take (a 400 over HTTP, exit 2 on the command line)."""


class UnknownVoice(VoiceError):
    """A well-formed name that names nothing: carries what exists, so a front end can suggest one."""

    def __init__(self, model: str, voice: str, available: tuple[str, ...], choices: str) -> None:
        what = "the voice is empty" if not voice.strip() else f"model {model} has no voice {voice!r}"
        super().__init__(f"{what}; {choices}")
        self.model, self.voice, self.available, self.choices = model, voice, available, choices

    def __reduce__(self) -> tuple[type[UnknownVoice], tuple[str, str, tuple[str, ...], str]]:
        # the Ray front door receives a replica's check error pickled: keep every field
        return (UnknownVoice, (self.model, self.voice, self.available, self.choices))


class VoiceRefused(VoiceError):
    """A name that could reach outside its folder, or a path where only names are taken."""


@dataclass(frozen=True)
class VoiceFolder:
    """A folder of embedding files. `boundary` is where their real paths must stay: the folder itself,
    except for a hub cache snapshot, whose files are symlinks into the repository's `blobs/`."""

    path: Path
    boundary: Path
    origin: str  # "checkpoint", "configured" or "hub cache": what `vox voices` shows


@dataclass(frozen=True)
class VoiceCatalog:
    """The voices a checkpoint takes: its declared kinds and where their names come from."""

    speakers: tuple[str, ...] = ()
    folders: tuple[VoiceFolder, ...] = ()
    suffix: str = ""  # an embedding file is `<folder>/<name><suffix>`
    path_suffix: str | None = None  # a voice file given by path ends with it; None: the family takes no files

    @property
    def kinds(self) -> tuple[VoiceKind, ...]:
        kinds = [VoiceKind.SPEAKER] if self.speakers else []
        if self.suffix:
            kinds.append(VoiceKind.EMBEDDING)
        if self.path_suffix:
            kinds.append(VoiceKind.FILE)
        return tuple(kinds)

    def names(self) -> tuple[str, ...]:
        """Every name this catalog resolves: the speakers, then each folder's files (first folder wins)."""
        names = list(self.speakers)
        if self.suffix:
            for folder in self.folders:
                for f in sorted(folder.path.rglob("*" + self.suffix)):
                    name = f.relative_to(folder.path).as_posix()[: -len(self.suffix)]
                    if name not in names:
                        names.append(name)
        return tuple(names)


@dataclass(frozen=True)
class ResolvedVoice:
    kind: VoiceKind
    name: str  # the speaker as the checkpoint spells it, or the file's voice name
    path: Path | None = None  # the embedding file (EMBEDDING, FILE)


def hub_snapshot(repo: str) -> VoiceFolder | None:
    """The newest cached snapshot of a hub repository, if any (no network)."""
    hub = os.environ.get("HF_HUB_CACHE") or Path(
        os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    cached = Path(hub) / ("models--" + repo.replace("/", "--"))
    snaps = cached / "snapshots"
    if not snaps.is_dir():
        return None
    found = sorted(snaps.iterdir(), key=lambda p: p.stat().st_mtime)
    return VoiceFolder(found[-1], cached, "hub cache") if found else None


def _cache_repo(folder: Path) -> Path:
    """A folder's boundary: itself, or for a folder inside a hub cache snapshot the cached repository
    (`models--org--name`: the snapshot's files are symlinks into its `blobs/`)."""
    for parent in folder.parents:
        if parent.name == "snapshots" and parent.parent.name.startswith("models--"):
            return parent.parent
    return folder


def configured_folder() -> Path | None:
    value = os.environ.get(VOICES_DIR_ENV) or os.environ.get(LEGACY_VOICES_DIR_ENV)
    return Path(value) if value else None


def voice_folders(checkpoint_folder: Path | None, hub_repo: str | None = None) -> tuple[VoiceFolder, ...]:
    """The folders a family's embedding names are looked up in, in order (those that exist)."""
    found: list[VoiceFolder] = []
    if checkpoint_folder is not None and checkpoint_folder.is_dir():
        found.append(VoiceFolder(checkpoint_folder, _cache_repo(checkpoint_folder), "checkpoint"))
    configured = configured_folder()
    if configured is not None and configured.is_dir():
        found.append(VoiceFolder(configured, configured, "configured"))
    if hub_repo is not None and not (checkpoint_folder is not None and checkpoint_folder.is_dir()):
        snapshot = hub_snapshot(hub_repo)
        if snapshot is not None:
            found.append(snapshot)
    return tuple(found)


def unsafe_name(voice: str) -> str | None:
    """Why `voice` cannot be a name inside a folder (None: it can). Only the string is read: this runs
    before any file is opened. `/` may separate the sub-folders of a listed name (kyutai/tts-voices names
    are `expresso/ex03-...`), but every part must be a plain name."""
    if "\x00" in voice or "\\" in voice:
        return "holds a backslash or a NUL"
    if voice.startswith(("/", "~")) or (len(voice) > 1 and voice[1] == ":"):
        return "is an absolute path"
    if any(part in ("", ".", "..") for part in voice.split("/")):
        return "has an empty, '.' or '..' part"
    return None


def resolve_voice(voice: str, catalog: VoiceCatalog, *, allow_paths: bool, model: str) -> ResolvedVoice:
    """`voice` as `catalog` resolves it: a file path (only with `allow_paths`), a declared speaker (any
    case) or an embedding file by name. Raises a VoiceError naming the voice and what exists."""
    if not voice.strip():
        raise UnknownVoice(model, voice, catalog.names(), _choices(catalog, model))
    if catalog.path_suffix and voice.endswith(catalog.path_suffix):
        if not allow_paths:
            raise VoiceRefused(f"voice {voice!r} is a file name: a request over the network names a voice "
                               f"and never a file; {_choices(catalog, model)}")
        path = Path(voice).expanduser()
        if not path.is_file():
            raise VoiceError(f"voice file {voice} does not exist")
        return ResolvedVoice(VoiceKind.FILE, path.name[: -len(catalog.path_suffix)], path)
    problem = unsafe_name(voice)
    if problem is not None:
        raise VoiceRefused(f"voice {voice!r} {problem}: a voice is a name from the model's list, not a "
                           f"path; {_choices(catalog, model)}")
    for speaker in catalog.speakers:
        if speaker.lower() == voice.lower():
            return ResolvedVoice(VoiceKind.SPEAKER, speaker)
    if catalog.suffix:
        for folder in catalog.folders:
            candidate = folder.path / (voice + catalog.suffix)
            if candidate.is_file():
                if not candidate.resolve().is_relative_to(folder.boundary.resolve()):
                    raise VoiceRefused(f"voice {voice!r} leaves its voices folder ({folder.origin}): "
                                       "its file links outside it")
                return ResolvedVoice(VoiceKind.EMBEDDING, voice, candidate)
    raise UnknownVoice(model, voice, catalog.names(), _choices(catalog, model))


def _choices(catalog: VoiceCatalog, model: str) -> str:
    names = catalog.names()
    if not names:
        suffix = catalog.path_suffix
        files = f" or a voice file (*{suffix}) from the command line" if suffix else ""
        return f"it has no named voices{files}"
    shown = ", ".join(names[:SHOWN_NAMES])
    more = f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else ""
    return f"choose one of {shown}{more} (see vox voices -m {model})"
