"""`vox models` (known models and what is cached), `vox models pull ID`, and the check that a model
is available before `say`/`batch` try to load it (we never start a multi-GB download implicitly)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from voxcli.errors import VoxError

DEMO = "demo"
DEMO_DIA = "demo-dia"
DEMOS = (DEMO, DEMO_DIA)
# Used until voxcli.models publishes KNOWN_MODELS (and to describe them).
_DESCRIPTIONS = {
    "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice": "9 built-in voices, 10 languages",
    "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice": "9 built-in voices + style instructions",
    "Qwen/Qwen3-TTS-12Hz-0.6B-Base": "voice clone from --ref-audio",
    "Qwen/Qwen3-TTS-12Hz-1.7B-Base": "voice clone from --ref-audio",
    "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign": "a voice described by --instructions",
    "nari-labs/Dia-1.6B-0626": "English dialogue ([S1]/[S2]), CFG, voice clone from --ref-audio",
}


def known_models() -> list[str]:
    try:
        from voxcli.models import KNOWN_MODELS  # type: ignore[attr-defined]

        return list(KNOWN_MODELS)
    except ImportError:
        return list(_DESCRIPTIONS)


@dataclass
class ModelEntry:
    name: str
    description: str
    cached: bool
    location: str | None
    size_bytes: int | None


def looks_like_hub_id(source: str) -> bool:
    return source.count("/") == 1 and not Path(source).exists() and not source.startswith((".", "/", "~"))


def cached_snapshot(repo_id: str) -> Path | None:
    """The local snapshot folder of a hub model when its config.json is in the Hugging Face cache."""
    from huggingface_hub import try_to_load_from_cache

    try:
        hit = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # noqa: BLE001 - a malformed id is simply "not cached"
        return None
    return Path(hit).parent if isinstance(hit, str) else None


def demo_dir() -> Path:
    from voxcli.models import DEMO as demo_name
    from voxcli.models import cache_dir

    return cache_dir() / demo_name


def list_models() -> list[ModelEntry]:
    entries = []
    demo = demo_dir()
    entries.append(ModelEntry(DEMO, "tiny random weights, offline; its audio is not speech",
                              (demo / "config.json").exists(), str(demo), None))
    demo_dia = demo.parent / DEMO_DIA
    entries.append(ModelEntry(DEMO_DIA, "tiny random Dia (dialogue, CFG), offline; its audio is not speech",
                              (demo_dia / "config.json").exists(), str(demo_dia), None))
    for name in known_models():
        snap = cached_snapshot(name)
        entries.append(ModelEntry(name, _DESCRIPTIONS.get(name, ""), snap is not None,
                                  str(snap) if snap else None, _dir_size(snap) if snap else None))
    return entries


def _dir_size(path: Path) -> int:
    # Snapshot files are symlinks into blobs/; stat follows them to the real sizes.
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def ensure_available(source: str) -> None:
    """Fail early, with the way out, when a hub model is not on this machine."""
    if source in DEMOS or not looks_like_hub_id(source):
        if source not in DEMOS and not Path(source).expanduser().exists():
            raise VoxError(f"model {source!r} is neither a known model id, a local checkpoint folder nor "
                           "'demo'; see vox models for the choices.")
        return
    if cached_snapshot(source) is None:
        raise VoxError(f"model {source} is not in the local Hugging Face cache; download it with "
                       f"`vox models pull {source}`, or use the offline demo model with `-m demo`.")


def pull(repo_id: str) -> Path:
    """Download a model into the Hugging Face cache (huggingface_hub shows per-file progress bars)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError

    if repo_id in DEMOS:
        raise VoxError("the demo model is not downloaded; it is built locally on first use "
                       "(vox say -m demo).")
    if not looks_like_hub_id(repo_id):
        raise VoxError(f"{repo_id!r} is not a Hugging Face model id (owner/name); see vox models.")
    try:
        return Path(snapshot_download(repo_id))
    except RepositoryNotFoundError:
        raise VoxError(f"no model {repo_id} on the Hugging Face Hub; check the id (see vox "
                       "models).") from None
    except LocalEntryNotFoundError:
        raise VoxError(f"cannot download {repo_id}: the Hugging Face Hub is not reachable from here "
                       "(offline, or HF_HUB_OFFLINE=1); connect and retry, or use -m demo.") from None
    except HfHubHTTPError as e:
        raise VoxError(f"downloading {repo_id} failed: {e}; retry later.") from None
