"""Model programs, one package per family. `voxcli.models` is this folder (see pyproject package-dir).

`load_model(source)` picks the family from the checkpoint's config.json `model_type` (models/registry.py
lists the families). A demo alias (e.g. "demo": a tiny random-weight Qwen3-TTS CustomVoice checkpoint) is
generated on first use into $VOX_CACHE/<alias> (default ~/.cache/voxcli/<alias>), so the whole pipeline
runs offline. Its audio is not speech: the weights are random.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path

from . import registry
from .base import CheckpointError, ModelProgram, ModelSpec

log = logging.getLogger(__name__)

DEMO = "demo"  # the default family's demo alias
_demo_warned: set[str] = set()


def known_models() -> tuple[str, ...]:
    """Hub ids of every registered family (what `vox models` lists besides the demos)."""
    return tuple(m.id for m in registry.hub_models())


def is_demo(name: str) -> bool:
    """Whether `name` is a demo alias of some family (built locally, random weights)."""
    return registry.find_demo(name) is not None


def cache_dir() -> Path:
    return Path(os.environ.get("VOX_CACHE") or Path.home() / ".cache" / "voxcli")


def demo_checkpoint(name: str = DEMO) -> Path:
    """Build a demo alias's checkpoint once (in a temp dir, then an atomic rename) and return its path."""
    found = registry.find_demo(name)
    if found is None:
        raise CheckpointError(f"no demo model named {name!r}; demos: "
                              f"{', '.join(d.name for d in registry.demos())}")
    demo = found[1]
    root = cache_dir()
    out = root / demo.name
    stamp = out / "VOX_DEMO_VERSION"
    if stamp.exists() and stamp.read_text().strip() == demo.version:
        return out
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{demo.name}-", dir=root))
    try:
        demo.build(tmp / "ckpt")
        (tmp / "ckpt" / "VOX_DEMO_VERSION").write_text(demo.version)
        if out.exists():
            shutil.rmtree(out)
        try:
            (tmp / "ckpt").rename(out)
        except OSError:
            if not (stamp.exists()):  # another process won the race with a complete build: use it
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def describe_model(source: str, device: str = "cpu", dtype: str = "float32") -> ModelSpec:
    """The spec (voices, languages, modes, rates) of a demo alias, local checkpoint or cached hub id,
    from its config files alone when its family can (no torch, no weights); otherwise by loading it."""
    spec = describe_config(source)
    return spec if spec is not None else load_model(source, device, dtype).spec


def describe_config(source: str) -> ModelSpec | None:
    """The spec from the config files alone (no torch), or None where the family cannot describe this
    checkpoint so (load_model then names an unsupported model_type; a family may describe some layouts
    only)."""
    family, path = _family_and_path(source)
    spec = family.describe(str(path)) if family is not None and family.describe is not None else None
    return None if spec is None else replace(spec, name=source)


def family_of(source: str) -> registry.Family | None:
    """The family serving `source` (a demo alias, local checkpoint or cached hub id), from its files
    alone; None when none claims it (`vox voices` then lists no options)."""
    return _family_and_path(source)[0]


def _family_and_path(source: str) -> tuple[registry.Family | None, Path]:
    demo = registry.find_demo(source)
    claimed = None if demo is not None else _claimed(source)
    if demo is not None:
        return demo[0], demo_checkpoint(source)
    if claimed is not None:  # no config.json (CosyVoice 3, ESPnet SpeechLM): its files name the family
        return claimed
    from .locate import read_json, resolve

    path = resolve(source)
    return registry.family_for_model_type(read_json(path / "config.json").get("model_type")), path


def load_model(source: str, device: str = "cpu", dtype: str = "float32") -> ModelProgram:
    """A local checkpoint directory, a hub id in the local cache, or a demo alias ("demo")."""
    demo = registry.find_demo(source)
    if demo is not None:
        path = demo_checkpoint(source)
        if source not in _demo_warned:
            log.warning("model %r has random weights: its audio is not speech (pipeline demo only)", source)
            _demo_warned.add(source)
        program = demo[0].load(str(path), device, dtype)
        program.spec = replace(program.spec, name=source)
        return program
    from .locate import read_json, resolve  # no torch yet: a folder that does not exist is refused at once

    claimed = _claimed(source)
    if claimed is not None:
        program = claimed[0].load(str(claimed[1]), device, dtype)
        program.spec = replace(program.spec, name=source)
        return program
    root = resolve(source)
    model_type = read_json(root / "config.json").get("model_type")
    family = registry.family_for_model_type(model_type)
    if family is None:
        supported = ", ".join(json.dumps(t) for t in registry.model_types())
        raise CheckpointError(
            f"{root / 'config.json'} has model_type {json.dumps(model_type)}; voxcli serves the model "
            f"types {supported} (see vox models)"
        )
    program = family.load(str(root), device, dtype)
    program.spec = replace(program.spec, name=source)
    return program


def _claimed(source: str) -> tuple[registry.Family, Path] | None:
    """A family that recognises `source` (a local folder, or a hub id in the local cache) by its files
    rather than by a config.json `model_type` (see Family.claims)."""
    from .locate import cached_snapshot, looks_like_hub_id  # no torch: `vox voices` stays light

    for family in registry.families():
        if family.claims is None:
            continue
        p = Path(source).expanduser()
        if p.is_dir() and family.claims(p):
            return family, p
        if not p.exists() and looks_like_hub_id(source):
            snap = cached_snapshot(source, family.claim_file)
            if snap is not None and family.claims(snap):
                return family, snap
    return None
