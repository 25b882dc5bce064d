"""Kyutai voices, as family data for the one resolver (models/voices.py): precomputed speaker embeddings
`<name>.wav.<sig>@<epoch>.safetensors`, each one `speaker_wavs` tensor [1, 512, 125]. A name is the file's
path inside a voices folder without the suffix (e.g. `expresso/ex03-ex01_happy_001_channel1_334s.wav`),
looked up in the checkpoint's own `voices/` folder, `$VOX_VOICES_DIR`, and, for a checkpoint without a
folder (the released kyutai/tts-1.6b-en_fr), the Hugging Face cache of kyutai/tts-voices. From the CLI or
the Python API a voice may also be a path to such a file."""

from __future__ import annotations

from pathlib import Path

from ..voices import VoiceCatalog, voice_folders

VOICE_REPO = "kyutai/tts-voices"
FILE_SUFFIX = ".safetensors"


def voice_catalog(root: Path, suffix: str) -> VoiceCatalog:
    """`suffix`: the config's voice suffix (`.<sig>@<epoch>.safetensors`) that follows every name."""
    return VoiceCatalog(folders=voice_folders(root / "voices", VOICE_REPO), suffix=suffix,
                        path_suffix=FILE_SUFFIX)
