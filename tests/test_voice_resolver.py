"""The one voice resolver (models/voices.py), alone: speakers, a checkpoint folder, the configured folder,
the hub cache's kyutai/tts-voices layout, a path with and without `allow_paths`, and every way a name could
try to leave its folder (refused before any file is opened). No torch."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from voxcli.models.voices import (
    VOICES_DIR_ENV,
    UnknownVoice,
    VoiceCatalog,
    VoiceError,
    VoiceKind,
    VoiceRefused,
    resolve_voice,
    voice_folders,
)

SUFFIX = ".abc@1.safetensors"


def _voice(folder: Path, name: str) -> Path:
    f = folder / (name + SUFFIX)
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_bytes(b"not read: the resolver opens no file")
    return f


@pytest.fixture(autouse=True)
def _no_outside_folders(monkeypatch, tmp_path):
    monkeypatch.delenv(VOICES_DIR_ENV, raising=False)
    monkeypatch.delenv("VOX_KYUTAI_VOICES", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))


def _files(root: Path, hub_repo: str | None = None) -> VoiceCatalog:
    return VoiceCatalog(folders=voice_folders(root / "voices", hub_repo), suffix=SUFFIX,
                        path_suffix=".safetensors")


def _resolve(voice: str, catalog: VoiceCatalog, allow_paths: bool = False):
    return resolve_voice(voice, catalog, allow_paths=allow_paths, model="m")


def test_a_speaker_resolves_in_any_case_to_the_checkpoints_spelling():
    catalog = VoiceCatalog(speakers=("Vivian", "ryan"))
    assert catalog.kinds == (VoiceKind.SPEAKER,)
    got = _resolve("VIVIAN", catalog)
    assert got.kind is VoiceKind.SPEAKER and got.name == "Vivian" and got.path is None


def test_names_come_from_the_checkpoint_folder_then_the_configured_one(tmp_path, monkeypatch):
    own = _voice(tmp_path / "ckpt" / "voices", "expresso/happy.wav")
    configured = tmp_path / "mine"
    _voice(configured, "expresso/happy.wav")  # the checkpoint's own file wins
    extra = _voice(configured, "calm.wav")
    monkeypatch.setenv(VOICES_DIR_ENV, str(configured))
    catalog = _files(tmp_path / "ckpt")
    assert catalog.names() == ("expresso/happy.wav", "calm.wav")
    assert _resolve("expresso/happy.wav", catalog).path == own
    got = _resolve("calm.wav", catalog)
    assert got.kind is VoiceKind.EMBEDDING and got.name == "calm.wav" and got.path == extra


def _hub_voice(hub: Path, name: str) -> Path:
    """kyutai/tts-voices as huggingface_hub caches it: snapshots/<rev>/<name> -> ../../blobs/<sha>."""
    repo = hub / "models--kyutai--tts-voices"
    blob = repo / "blobs" / "0123abcd"
    blob.parent.mkdir(parents=True, exist_ok=True)
    blob.write_bytes(b"x")
    link = repo / "snapshots" / "rev1" / (name + SUFFIX)
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(Path("../" * (name.count("/") + 2)) / "blobs" / "0123abcd")
    return link


def test_the_hub_cache_serves_a_checkpoint_without_a_voices_folder(tmp_path):
    link = _hub_voice(tmp_path / "hub", "expresso/ex03.wav")
    released = tmp_path / "released"
    released.mkdir()
    catalog = _files(released, "kyutai/tts-voices")
    assert [f.origin for f in catalog.folders] == ["hub cache"]
    got = _resolve("expresso/ex03.wav", catalog)  # its link into blobs/ stays inside the cached repo
    assert got.kind is VoiceKind.EMBEDDING and got.path == link
    # a checkpoint with its own folder does not read the cache
    _voice(tmp_path / "own" / "voices", "a.wav")
    assert _files(tmp_path / "own", "kyutai/tts-voices").names() == ("a.wav",)


def test_a_path_is_a_voice_only_when_the_front_end_allows_paths(tmp_path):
    catalog = _files(tmp_path)  # no voices folder at all, as kyutai/tts-1.6b-en_fr ships
    outside = tmp_path / "elsewhere" / "me.wav.abc@1.safetensors"
    outside.parent.mkdir()
    outside.write_bytes(b"x")
    got = _resolve(str(outside), catalog, allow_paths=True)
    assert got.kind is VoiceKind.FILE and got.path == outside
    with pytest.raises(VoiceRefused, match="never a file"):
        _resolve(str(outside), catalog)
    with pytest.raises(VoiceError, match="does not exist"):
        _resolve(str(tmp_path / "missing.safetensors"), catalog, allow_paths=True)
    with pytest.raises(UnknownVoice, match="no voice 'x.npy'"):  # not this family's kind of file
        _resolve("x.npy", catalog, allow_paths=True)


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "a/../../b", "a//b", "./a", "..\\x", "~/x", "C:x"])
def test_a_name_that_could_leave_its_folder_is_refused_before_any_file_is_opened(tmp_path, monkeypatch, name):
    _voice(tmp_path / "voices", "a")
    catalog = _files(tmp_path)
    opened: list[str] = []
    monkeypatch.setattr(Path, "is_file", lambda self: opened.append(str(self)) or False)
    for allow_paths in (False, True):  # a path needs the family's file suffix: these are names
        with pytest.raises(VoiceRefused, match="not a path"):
            _resolve(name, catalog, allow_paths)
    assert opened == []


def test_a_symlink_out_of_the_folder_is_refused(tmp_path):
    secret = tmp_path / "secret.abc@1.safetensors"
    secret.write_bytes(b"x")
    folder = tmp_path / "ckpt" / "voices"
    folder.mkdir(parents=True)
    (folder / ("sneaky" + SUFFIX)).symlink_to(secret)
    with pytest.raises(VoiceRefused, match="links outside"):
        _resolve("sneaky", _files(tmp_path / "ckpt"))


def test_an_unknown_or_empty_name_lists_the_first_names(tmp_path):
    for i in range(12):
        _voice(tmp_path / "voices", f"v{i:02d}")
    catalog = _files(tmp_path)
    with pytest.raises(UnknownVoice) as e:
        _resolve("nobody", catalog)
    assert "model m has no voice 'nobody'" in str(e.value)
    assert "v00, v01" in str(e.value) and "v09 and 2 more" in str(e.value) and "v10" not in str(e.value)
    assert len(e.value.available) == 12
    with pytest.raises(UnknownVoice, match="the voice is empty; choose one of v00"):
        _resolve("", catalog)
    again = pickle.loads(pickle.dumps(e.value))  # the Ray front door gets a replica's error pickled
    assert str(again) == str(e.value) and again.available == e.value.available
    with pytest.raises(UnknownVoice, match="no named voices or a voice file"):
        _resolve("x", _files(tmp_path / "empty"))
