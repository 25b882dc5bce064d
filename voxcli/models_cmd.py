"""`vox models` (known models and what is cached), `vox models pull ID`, and the check that a model
is available before `say`/`batch` try to load it (we never start a multi-GB download implicitly)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from voxcli.errors import VoxError

if TYPE_CHECKING:
    from voxcli.models.base import ModelSpec


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
    from huggingface_hub import constants

    # The hub cache keeps a repo in HF_HUB_CACHE/models--owner--name: without that folder it is not cached,
    # answered without importing huggingface_hub's download stack (~0.3 s: `vox models` stays fast).
    if not (Path(constants.HF_HUB_CACHE) / f"models--{repo_id.replace('/', '--')}").is_dir():
        return None
    from huggingface_hub import try_to_load_from_cache

    try:
        hit = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # noqa: BLE001 - a malformed id is simply "not cached"
        return None
    return Path(hit).parent if isinstance(hit, str) else None


def demo_dir(name: str) -> Path:
    """Where a demo alias's checkpoint is built (its name from the registry: models/<family>/family.py)."""
    from voxcli.models import cache_dir

    return cache_dir() / name


def list_models() -> list[ModelEntry]:
    from voxcli.models import registry

    entries = []
    for demo in registry.demos():
        folder = demo_dir(demo.name)
        cached = (folder / "config.json").exists()
        entries.append(ModelEntry(demo.name, demo.description, cached, str(folder),
                                  _dir_size(folder) if cached else None))
    for m in registry.hub_models():
        snap = cached_snapshot(m.id)
        entries.append(ModelEntry(m.id, m.description, snap is not None,
                                  str(snap) if snap else None, _dir_size(snap) if snap else None))
    return entries


def _dir_size(path: Path) -> int:
    # Snapshot files are symlinks into blobs/; stat follows them to the real sizes.
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def size_text(size_bytes: int | None) -> str:
    """A size on disk for `vox models`: "-" when nothing is cached, else in kB, MB or GB as one word (a
    demo's few MB read "4.2MB", never "0.0 GB"; one word never wraps in a narrow table)."""
    if size_bytes is None:
        return "-"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.1f}{unit}"
    return f"{size_bytes}B"


def models_table(entries: list[ModelEntry]):
    """`vox models`: every known model, whether it is cached here and its size on disk, and what it is;
    a table that no terminal width cuts (voxcli/tables.py)."""
    from voxcli.tables import figure_table

    rows = [[e.name, "yes" if e.cached else "no", size_text(e.size_bytes), e.description] for e in entries]
    return figure_table("", ("model", "cached", "size", "about"), rows,
                        left=("model", "cached", "about"), prose=("about",))


def ensure_available(source: str) -> None:
    """Fail early, with the way out, when a hub model is not on this machine."""
    if _is_demo(source) or not looks_like_hub_id(source):
        if not _is_demo(source) and not Path(source).expanduser().exists():
            if "/" in source or source.startswith(("~", ".")):  # meant as a folder
                raise VoxError(f"model folder {source} does not exist; give a checkpoint folder, a hub id "
                               "or 'demo' (see vox models).")
            raise VoxError(f"model {source!r} is neither a known model id, a local checkpoint folder nor "
                           "'demo'; see vox models for the choices.")
        return
    if cached_snapshot(source) is None:
        raise VoxError(f"model {source} is not in the local Hugging Face cache; download it with "
                       f"`vox models pull {source}`, or use the offline demo model with `-m demo`.")


def _is_demo(name: str) -> bool:
    from voxcli.models import is_demo

    return is_demo(name)


def pull(repo_id: str) -> Path:
    """Download a model into the Hugging Face cache (huggingface_hub shows per-file progress bars)."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError, RepositoryNotFoundError

    if _is_demo(repo_id):
        raise VoxError(f"the {repo_id} model is not downloaded; it is built locally on first use "
                       f"(vox say -m {repo_id}).")
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


def option_lines(model: str) -> list[str]:
    """The request options `model`'s family takes, one line each, from its schema (`Family.options`):
    what `vox voices` lists and a JSONL line's or a request's `options` may hold."""
    from voxcli.models import family_of  # type: ignore[attr-defined]

    family = family_of(model)
    return [] if family is None else family.options.describe()


def voice_lines(spec: ModelSpec) -> list[str]:
    """`vox voices`' lines about voices, from the spec's catalog (models/voices.py): the names a request
    may give, the kinds they are and where embedding files were looked for."""
    catalog = spec.catalog
    names = catalog.names()
    lines = [f"voices:    {', '.join(names) or '(none: ' + ', '.join(spec.modes) + ')'}"]
    if catalog.kinds:
        kinds = [str(k) for k in catalog.kinds]
        if catalog.path_suffix:
            kinds[-1] = f"file (a *{catalog.path_suffix} path, from the command line or Python only)"
        lines.append(f"kinds:     {', '.join(kinds)}")
    for folder in catalog.folders:
        lines.append(f"folder:    {folder.path} ({folder.origin})")
    return lines
