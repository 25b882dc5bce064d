"""The model families voxcli serves: one `Family` registration per family, in the family's own package.

A family package `models/<name>/` provides `family.py` with a module-level `FAMILY = Family(...)`; the
one line below, `FAMILY_PACKAGES`, lists the packages. Everything that used to hard-code a family reads
this registry: `load_model` (by config.json `model_type`), the demo aliases, `vox models` (hub ids and
descriptions), the recipe a model gets by default, the sim/bench defaults (frame rate, chunk
schedule, model sizes for the cost profiles), the simulator calibration (`Family.calibration`,
`python -m voxcli.bench.calibration --family NAME`), the random-weight builders (`Family.tiny`,
`find_tiny` / `get_tiny`; `Tiny.program` draws a program's weights on the device, no checkpoint), the
reference generators parity checks compare with (`Family.reference`), the functions a per-op profiler
wraps (`Family.profile_ops`), the voices `vox serve` maps OpenAI voice names to
(`Family.openai_voices`) and the request options its programs take (`Family.options`). Code outside
models/ (benchmarks, scripts) reaches a family's code only through these, never by its package name.

A family registers its code as data: `Entry("models.qwen3_tts.program:Qwen3TTSProgram.load")` names
the loader, describer, demo and tiny builders, reference module, calibration and profiled ops by
module and attribute, and `resolve` (the one resolver) imports them on first use. So listing families is
cheap: `family.py` imports nothing heavy (no torch) and writes no wrapper functions.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .base import ChunkSchedule
from .options import NO_OPTIONS, OptionSchema

if TYPE_CHECKING:
    from .base import ModelProgram
    from .sim_calibration import Calibration

# The families, by package name under models/ (each has a family.py defining FAMILY).
FAMILY_PACKAGES: tuple[str, ...] = (
    "qwen3_tts", "dia", "higgs_audio", "speechlm", "cosyvoice3", "orpheus", "cosyvoice2", "zonos",
    "csm", "kyutai_tts", "vibevoice",
)


def resolve(ref: str) -> Any:
    """The object a `"package.module:Attr.attr"` reference names (a module for `"package.module"`),
    importing its module. A reference under `models.` names this package under whatever name it was
    imported as (`voxcli.models` when installed, `models` from a checkout), so a module is never loaded
    twice under two names. Not cached: the import system caches modules, and a test's monkeypatch of the
    attribute must be what callers get."""
    module, _, attrs = ref.partition(":")
    if module == "models" or module.startswith("models."):
        module = __package__ + module[len("models"):]
    found: Any = importlib.import_module(module)
    for attr in attrs.split(".") if attrs else ():
        found = getattr(found, attr)
    return found


class Entry:
    """A lazy entry point: a reference `resolve` reads on each call, plus keyword arguments bound at
    registration (a demo's size, a tiny layout), so a family registers data instead of wrapper functions.

    Calling it calls the target with the bound keywords under the caller's; a target that is not
    callable (a module, a calibration, a table of sizes) is returned as it is, so every registered
    field reads the same way: `family.calibration()`, `family.reference()`, `family.load(path, ...)`."""

    __slots__ = ("bound", "ref")

    def __init__(self, ref: str, **bound: Any) -> None:
        if ":" not in ref and not ref.count("."):
            raise ValueError(f"an entry point is 'package.module[:attribute]', got {ref!r}")
        self.ref = ref
        self.bound = bound

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        target = resolve(self.ref)
        if callable(target):
            return target(*args, **{**self.bound, **kwargs})
        if args or kwargs or self.bound:
            raise TypeError(f"{self.ref} is a value ({type(target).__name__}), not a function to call")
        return target

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Entry) and (self.ref, self.bound) == (other.ref, other.bound)

    def __hash__(self) -> int:
        return hash(self.ref)

    def __repr__(self) -> str:
        bound = "".join(f", {k}={v!r}" for k, v in self.bound.items())
        return f"Entry({self.ref!r}{bound})"


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
    streams_text: bool = False  # reads text as it arrives (ModelSpec.streams_text): the sim takes feeds


@dataclass(frozen=True)
class Tiny:
    """A random-weight checkpoint of the family's architecture, built locally at a named size (tests,
    benchmarks, `scripts/make_tiny.py`); the layout is the released checkpoints' (the loader reads it)."""

    name: str  # what `make_tiny.py --family` calls it (a family may have several layouts: higgs, higgs-v3)
    # (out folder, size=, seed=, **options) -> the checkpoint folder written; imports the builder when called
    build: Callable[..., Path]
    # () -> a table whose keys are the sizes it builds, the small test one first (imports the builder)
    size_table: Callable[[], Any]
    options: tuple[str, ...] = ()  # further keyword options `build` takes (variant, proj, clone_models...)
    # (size, device, dtype, seed=) -> the family's program with random weights drawn where it runs, no
    # checkpoint written (the device check's model: seconds on a GPU, not a minute of writing 4 GB);
    # imports the builder when called. None: the family builds only checkpoints.
    program: Callable[..., ModelProgram] | None = None
    more_sizes: tuple[str, ...] = ()  # sizes `build` takes beyond the table's (another builder's)

    def sizes(self) -> tuple[str, ...]:
        """The sizes it builds, the small test one first."""
        return (*self.size_table(), *self.more_sizes)


@dataclass(frozen=True)
class Family:
    """A family's registration. Its code is named, not imported: every callable field is an `Entry`
    (a test may pass a plain function), resolved when first called."""

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
    # The named voices its released checkpoints offer (a checkpoint may have fewer: the demo has five);
    # () for a family whose voice comes from the text, a reference clip or instructions.
    voices: tuple[str, ...] = ()
    # OpenAI voice name (alloy, echo, ...) -> its voices that fit the OpenAI voice's character, best
    # first (`vox serve` maps a request's OpenAI name to the first one the served model has). Empty for
    # a family without named voices: there every OpenAI name means the model's default voice.
    openai_voices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    tiny: tuple[Tiny, ...] = ()  # its random-weight builders
    # () -> its simulator calibration (models/sim_calibration.py; `python -m voxcli.bench.calibration
    # --family NAME`), imported when called; None: no GPU cost profile of its own
    calibration: Callable[[], Calibration] | None = None
    # () -> its batch-1 reference generator module (`generate`, `teacher_forced`, `decode_full`, `Trace`:
    # one request through the same stages the engine drives; parity checks and benchmarks compare against
    # it), imported when called; None: the family has none
    reference: Callable[[], ModuleType] | None = None
    # () -> (owner, attribute, op category) of the functions a per-op profiler of its decode step wraps
    # (`python -m benchmarks profile_cfg`), imported when called; None: not profiled per op
    profile_ops: Callable[[], tuple[tuple[Any, str, str], ...]] | None = None
    # The request options its programs take (`SynthesisRequest.options`), declared once in the family's
    # options.py (models/options.py): the one validator, `vox voices` and the fuzz suites read them.
    options: OptionSchema = NO_OPTIONS


@cache
def families() -> tuple[Family, ...]:
    return tuple(importlib.import_module(f"{__package__}.{p}.family").FAMILY for p in FAMILY_PACKAGES)


def find_family(name: str) -> Family | None:
    """A family by its package (`qwen3_tts`), its name (`Qwen3-TTS 12 Hz`, any case), a model type, or
    one of its models (a sim model, hub id or demo alias)."""
    if name in FAMILY_PACKAGES:
        return importlib.import_module(f"{__package__}.{name}.family").FAMILY  # type: ignore[no-any-return]
    low = name.lower()
    named = next((f for f in families() if low == f.name.lower() or name in f.model_types), None)
    if named is not None:
        return named
    found = find_sim_model(name) or find_demo(name)
    if found is not None:
        return found[0]
    hub = find_hub_model(name)
    return next((f for f in families() if hub in f.hub_models), None) if hub is not None else None


def find_tiny(name: str) -> Tiny | None:
    """A random-weight builder by its name (`qwen3_tts`, `dia`, `higgs`, `higgs-v3`, `cosyvoice3`,
    `speechlm`)."""
    return next((t for f in families() for t in f.tiny if t.name == name), None)


def get_reference(name: str) -> ModuleType:
    """The reference generator of the family `name` names (as `find_family`), or ValueError."""
    family = find_family(name)
    if family is None or family.reference is None:
        raise ValueError(f"no reference generator for {name!r}")
    return family.reference()


def get_tiny(name: str) -> Tiny:
    """`find_tiny`, or ValueError naming the builders there are."""
    found = find_tiny(name)
    if found is None:
        raise ValueError(f"no random-weight builder {name!r}; one of {', '.join(t.name for t in tinies())}")
    return found


def tinies() -> tuple[Tiny, ...]:
    return tuple(t for f in families() for t in f.tiny)


def openai_voice_preferences() -> dict[str, tuple[str, ...]]:
    """Each OpenAI voice name -> the voices every family prefers for it, in registration order. Voice
    names are each family's own, so the first of them a model has is its own family's choice."""
    out: dict[str, tuple[str, ...]] = {}
    for f in families():
        for name, voices in f.openai_voices.items():
            out[name] = out.get(name, ()) + tuple(voices)
    return out


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


def sim_sizes(model: str) -> dict[str, Any]:
    """The sizes a sim model declares (its family's cost arithmetic reads them); LookupError naming the
    model when no family registers it."""
    found = find_sim_model(model)
    if found is None:
        raise LookupError(f"no registered family has the sim model {model!r} (models/registry.py)")
    return dict(found[1].sizes)


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
