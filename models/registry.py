"""The model families voxcli serves: one `Family` registration per family, in the family's own package.

A family package `models/<name>/` provides `family.py` with a module-level `FAMILY = Family(...)`; the
one line below, `FAMILY_PACKAGES`, lists the packages. Everything that used to hard-code a family reads
this registry: `load_model` (by config.json `model_type`), the demo aliases, `vox models` (hub ids and
descriptions), the recipe a model gets by default, and the sim/bench defaults (frame rate, chunk
schedule, model sizes for the cost profiles).

Listing families is cheap: `family.py` imports nothing heavy (no torch); `Family.load` and the demo
builders import the program code when called.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .base import ChunkSchedule

if TYPE_CHECKING:
    from .base import ModelProgram

# The families, by package name under models/ (each has a family.py defining FAMILY).
FAMILY_PACKAGES: tuple[str, ...] = ("qwen3_tts", "dia", "higgs_audio", "speechlm", "cosyvoice3")


@dataclass(frozen=True)
class HubModel:
    """A checkpoint on the Hugging Face Hub that the family loads."""

    id: str  # e.g. "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"
    description: str  # one line for `vox models`
    recipe: str | None = None  # shipped recipe (recipes/<name>.toml) it runs with by default


@dataclass(frozen=True)
class Demo:
    """An offline alias (`-m demo`): a random-weight checkpoint built locally on first use."""

    name: str  # the alias, e.g. "demo"
    build: Callable[[Path], None]  # writes a complete checkpoint into the (empty) folder given
    version: str  # bump when the builder's output changes (forces a rebuild of cached copies)
    description: str
    recipe: str | None = None


@dataclass(frozen=True)
class SimModel:
    """A model size the simulator and the cost-profile arithmetic know (`--model qwen3-tts-1.7b`)."""

    name: str  # also the name of its shipped recipe
    sizes: Mapping[str, Any]  # dimensions the cost model needs (layer counts, widths...), per family
    # Its GPU cost profile under recipes/gpus/ ("{gpu}" = the --gpu name): the shared per-GPU profiles
    # by default; a model with costs of its own names its own (never silently another model's).
    gpu_profile: str = "{gpu}"
    # its codec's hold-back in frames when it differs from the family's (SimSpec.codec_lookahead_frames)
    codec_lookahead_frames: float | None = None


@dataclass(frozen=True)
class SimSpec:
    """What the sim and the bench assume about the family's audio when no checkpoint is loaded."""

    sample_rate: int
    frame_rate: float  # backbone steps per second of audio
    samples_per_frame: int
    codebooks: int
    chunk: ChunkSchedule  # the chunk schedule the GPU cost profiles were derived with
    models: tuple[SimModel, ...] = ()
    cfg_scale: float | None = None  # the checkpoint's default guidance (> 1: requests run as width-2 pairs)
    lead_steps: int = 0  # decode steps before a request's first frame (a delay pattern's fill)
    codec_lookahead_frames: float = 0.0  # the released codec's hold-back (ModelSpec.codec_lookahead_frames)


@dataclass(frozen=True)
class Family:
    name: str  # e.g. "Qwen3-TTS 12 Hz"
    model_types: tuple[str, ...]  # config.json `model_type` values this family loads
    load: Callable[[str, str, str], ModelProgram]  # (checkpoint dir, device, dtype) -> program
    sim: SimSpec
    hub_models: tuple[HubModel, ...] = ()
    demos: tuple[Demo, ...] = field(default_factory=tuple)
    # (checkpoint dir) -> ModelSpec from the config files alone, without torch or weights (`vox voices`
    # answers in well under a second); None: describing the model means loading it.
    describe: Callable[[str], Any] | None = None
    # A checkpoint folder with no config.json of its own that this family recognises by its files
    # (ESPnet SpeechLM: train*.yaml + inference.yaml + model.pt;
    # CosyVoice 3: cosyvoice3.yaml), and the file a hub snapshot must hold.
    claims: Callable[[Path], bool] | None = None
    claim_file: str = "config.json"


@cache
def families() -> tuple[Family, ...]:
    return tuple(importlib.import_module(f"{__package__}.{p}.family").FAMILY for p in FAMILY_PACKAGES)


def default_family() -> Family:
    """The first registered family: its sim spec is the sim's default when no model names another."""
    return families()[0]


def model_types() -> tuple[str, ...]:
    return tuple(t for f in families() for t in f.model_types)


def family_for_model_type(model_type: Any) -> Family | None:
    return next((f for f in families() if model_type in f.model_types), None)


def hub_models() -> tuple[HubModel, ...]:
    return tuple(m for f in families() for m in f.hub_models)


def demos() -> tuple[Demo, ...]:
    return tuple(d for f in families() for d in f.demos)


def find_demo(name: str) -> tuple[Family, Demo] | None:
    return next(((f, d) for f in families() for d in f.demos if d.name == name), None)


def find_hub_model(model: str) -> HubModel | None:
    """A known hub model by id (case-insensitive), or by a local folder named after one (the last path
    component, or a Hugging Face cache folder `models--Owner--Name`)."""
    low = model.lower().rstrip("/")
    for m in hub_models():
        mid = m.id.lower()
        base = mid.split("/", 1)[1]
        if low == mid or low.rsplit("/", 1)[-1] == base or f"models--{mid.replace('/', '--')}" in low:
            return m
    return None


def find_sim_model(model: str) -> tuple[Family, SimModel] | None:
    """A sim model by its name (`qwen3-tts-1.7b`), or the one a known hub model's recipe names."""
    hub = find_hub_model(model)
    names = {model.lower()} | ({hub.recipe} if hub is not None and hub.recipe else set())
    return next(((f, s) for f in families() for s in f.sim.models if s.name in names), None)


def sim_spec_for(model: str | None) -> SimSpec:
    """The sim spec of the family `model` belongs to (a sim model name, hub id or demo alias); the
    default family's for None or a name no family claims."""
    if model:
        found = find_sim_model(model)
        if found is not None:
            family, sim_model = found
            if sim_model.codec_lookahead_frames is not None:
                return replace(family.sim, codec_lookahead_frames=sim_model.codec_lookahead_frames)
            return family.sim
        demo = find_demo(model)
        if demo is not None:
            return demo[0].sim
    return default_family().sim


def recipe_for(model: str) -> str | None:
    """The shipped recipe a model runs with when the user names none: a demo alias's, or a known hub
    model's (by id or by a folder named after it)."""
    demo = find_demo(model)
    if demo is not None:
        return demo[1].recipe
    hub = find_hub_model(model)
    return hub.recipe if hub is not None else None


def default_model(simulated: bool = False) -> str:
    """The model a command runs when none is named: the default family's first hub model, or with
    `simulated` (the sim executor, whose `--model` names a model recipe) its last sim model, the largest:
    the configuration the GPU cost profiles were calibrated on."""
    family = default_family()
    return family.sim.models[-1].name if simulated else family.hub_models[0].id
