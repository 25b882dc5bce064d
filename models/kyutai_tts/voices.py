"""Kyutai voices: precomputed speaker embeddings `<name>.wav.<sig>@<epoch>.safetensors` (kyutai/tts-voices),
each one `speaker_wavs` tensor [1, 512, 125]. A voice is a path to such a file, or a name (its path
inside a voices folder without the suffix, e.g. `expresso/ex03-ex01_happy_001_channel1_334s.wav`) found in,
in order: the checkpoint's own `voices/` folder, `$VOX_KYUTAI_VOICES`, the Hugging Face cache of
kyutai/tts-voices. Listing and resolving read only file names (no torch): `vox voices` answers from files."""

from __future__ import annotations

import os
from pathlib import Path

VOICE_REPO = "kyutai/tts-voices"


def voice_folders(root: Path) -> list[Path]:
    folders = [root / "voices"]
    if os.environ.get("VOX_KYUTAI_VOICES"):
        folders.append(Path(os.environ["VOX_KYUTAI_VOICES"]))
    cache = _hub_snapshot()
    if cache is not None:
        folders.append(cache)
    return [f for f in folders if f.is_dir()]


def _hub_snapshot() -> Path | None:
    """The newest cached snapshot of kyutai/tts-voices, if any (no network)."""
    home = Path(os.environ.get("HF_HUB_CACHE") or Path(os.environ.get("HF_HOME", Path.home() / ".cache" /
                                                                         "huggingface")) / "hub")
    snaps = home / ("models--" + VOICE_REPO.replace("/", "--")) / "snapshots"
    if not snaps.is_dir():
        return None
    found = sorted(snaps.iterdir(), key=lambda p: p.stat().st_mtime)
    return found[-1] if found else None


def list_voices(root: Path, suffix: str) -> tuple[str, ...]:
    names: list[str] = []
    for folder in voice_folders(root):
        for f in sorted(folder.rglob("*" + suffix)):
            name = str(f.relative_to(folder))[: -len(suffix)]
            if name not in names:
                names.append(name)
    return tuple(names)


def resolve_voice(root: Path, voice: str, suffix: str) -> Path | None:
    """A voice name or file path -> its embedding file (None if not found)."""
    p = Path(voice)
    if voice.endswith(".safetensors") and p.is_file():
        return p
    for folder in voice_folders(root):
        f = folder / (voice + suffix)
        if f.is_file():
            return f
    return None
