"""The one configuration object of voxcli.

Every knob of the engine lives in `EngineConfig`. Values come, in this order of precedence, from
dataclass defaults < a recipe TOML in `recipes/` < explicit overrides (`--set key=value` on the CLI).
Nothing else in the code base invents its own settings: lanes, executors and the scheduler all read
this object.
"""

from __future__ import annotations

import dataclasses
import math
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from voxcli.engine.admission_policies import ADMISSION_POLICIES
from voxcli.engine.lane_policies import LANE_POLICIES
from voxcli.models.base import ChunkSchedule  # noqa: F401 - the schedule lives at the model seam
from voxcli.models.registry import default_model

Policy = Literal["sync", "sync2", "lanes", "full"]
Admission = Literal["ttfa-gate", "deadline", "prefill-first"]
ExecutorKind = Literal["auto", "cpu", "sim", "cuda"]

POLICIES: tuple[str, ...] = tuple(LANE_POLICIES)  # the registries the scheduler picks policies from
ADMISSIONS: tuple[str, ...] = tuple(ADMISSION_POLICIES)
# What one engine (one GPU) does in a disaggregated placement (voxcli/engine/roles.py): both stages, the
# LM lane only (chunks' codes leave the engine), or the codec lanes only (chunks arrive from elsewhere).
ROLES: tuple[str, ...] = ("both", "lm", "codec")


DTYPES: tuple[str, ...] = ("auto", "float32", "bfloat16", "float16")
_DEVICE = re.compile(r"cpu|auto|cuda(:\d+)?")


class ConfigError(ValueError):
    """A recipe or override that cannot be used; the message says which key and why."""


def _check_types(cfg: EngineConfig) -> None:
    """Every field holds the type its default has (a recipe or --set can put anything there)."""
    for f in dataclasses.fields(cfg):
        value, default = getattr(cfg, f.name), getattr(EngineConfig, f.name, None)
        if f.name == "chunk":  # None (the model's own schedule) or a ChunkSchedule: validate() checks it
            continue
        if isinstance(default, tuple):
            if not isinstance(value, tuple) or any(isinstance(v, bool) or not isinstance(v, int)
                                                   for v in value):
                raise ConfigError(f"{f.name} must be a list of whole numbers, got {value!r}")
        elif isinstance(default, bool):
            if not isinstance(value, bool):
                raise ConfigError(f"{f.name} must be true or false, got {value!r}")
        elif isinstance(default, float):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"{f.name} must be a number, got {value!r}")
        elif isinstance(default, int):
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{f.name} must be a whole number, got {value!r}")
        elif isinstance(default, str) and not isinstance(value, str):
            raise ConfigError(f"{f.name} must be a string, got {value!r}")


@dataclass(frozen=True)
class EngineConfig:
    # --- which model and where ---------------------------------------------------------------
    # the registry's default (its default family's first hub model): named in one place, models/registry.py
    model: str = default_model()
    # "auto": the cuda executor on "cuda" when torch sees a CUDA device, else cpu (see `resolve_auto`)
    executor: ExecutorKind = "auto"
    device: str = "auto"
    # weights and KV: "auto" = bfloat16 where the device does it well (CUDA; a CPU with AVX512-BF16 or
    # AMX, see `resolve_dtype`), else float32; parity tests and the demo recipes pin float32
    dtype: str = "float32"
    gpu: str = ""  # sim/profile: name of a cost profile in recipes/gpus/ (h100, h200, b200)
    sim_model: str = ""  # sim: fidelity model of the profile's [sim] (optimistic, honest); "" = its default

    # --- scheduling policy --------------------------------------------------------------------
    policy: Policy = "full"
    role: str = "both"  # both | lm | codec: the lanes this engine runs (lanes.py, engine/roles.py)
    # ttfa-gate: deadline-aware, and a request whose predicted TTFA misses the target is refused at
    # submit with a retry-after (voxcli/engine/admission.py): the default of the shipped model recipes
    # (serving, `vox bench`). deadline / prefill-first queue everything: the library default stays
    # deadline, since an engine on hardware that cannot meet the target (a CPU) would refuse most work.
    admission: Admission = "deadline"
    background_min_batch: int = 8  # B: background codec lane waits for this many ready chunks
    # beyond the paper (both off = the paper's design; see voxcli/engine/admission.py, scheduler.py):
    urgency_chunking: bool = False  # ttfa-gate picks each request's first chunk (and a ramp) from its slack
    adaptive_batching: bool = False  # B and the urgent margin follow the background lane's measured load
    # the late-chunk half of the paper's design (policies full, lanes; both on = the paper's), ablations:
    late_urgent: bool = True  # a later chunk within urgent_margin_s of its deadline moves to the urgent lane
    deadline_launch: bool = True  # a background batch below B launches when waiting longer would be late
    # a background batch (policy full) is cut to the chunks whose batch ends before the first of them turns
    # urgent; a chunk too close for any background batch waits for the urgent lane (engine/codec_batcher.py)
    slack_cap: bool = True
    urgent_margin_s: float = 0.100  # delta_u: a chunk whose deadline is this close is urgent
    max_defer_s: float = 0.100  # deadline-aware admission defers a prefill at most this long in a row
    # a request's preparation (a clone's speaker model, text front ends) fails past this many seconds
    # (engine/prepare_guard.py); a CPU running a real-size speaker model needs more than a GPU's 10 s
    prepare_limit_s: float = 10.0
    ttfa_target_s: float = 0.200  # SLO: time to first audio
    urgent_buckets: tuple[int, ...] = (1, 2, 4, 8)
    background_buckets: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    decode_buckets: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256)
    max_prefill_batch: int = 4
    max_prefill_tokens: int = 4096
    # None = the model's own schedule (ModelSpec.chunk); a recipe's [engine.chunk] table or `--set chunk.*`
    # makes it explicit, and an explicit schedule always wins, even one equal to ChunkSchedule().
    chunk: ChunkSchedule | None = None

    # --- SM split (cuda executor, sim) ---------------------------------------------------------
    lm_sms: int = 96
    codec_sms: int = 32

    # --- bounded resources ---------------------------------------------------------------------
    max_running: int = 256  # decode rows in flight
    max_queue: int = 1024  # waiting requests; beyond this a request is refused with a reason
    # Caps, not sizes: after the weights load, the memory plan (voxcli/engine/memory_plan.py) gives the KV
    # pool and the codec slot table what the device's free memory x memory_fraction holds, at most these
    # many (and at most what max_running rows at the context bound need); a program without device memory
    # (the sim's) takes them as given.
    kv_page_size: int = 16
    kv_pages: int = 8192
    codec_slots: int = 256
    # per-request codec state that grows with the request (CosyVoice 3's DiT caches), GB in all: a cap the
    # memory plan sizes within (0 = no cap of its own; the plan writes what it gives); requests reserve their
    # worst case against it when they take a slot (voxcli/engine/codec_slots.py)
    codec_state_gb: float = 0.0
    # share of the free memory (GPU) / available RAM (CPU) the plan may use; 0 = the device's default
    # (0.90 of a GPU, 0.50 of the RAM: the OS and other programs keep the rest)
    memory_fraction: float = 0.0
    max_frames: int = 2048  # hard cap per request (the model's own stop rules come first)

    # --- host ---------------------------------------------------------------------------------
    seed: int = 0
    threads: int = 0  # torch CPU threads; 0 = torch's default

    def validate(self) -> EngineConfig:
        _check_types(self)
        if self.policy not in POLICIES:
            raise ConfigError(f"policy must be one of {', '.join(POLICIES)}, got {self.policy!r}")
        if self.role not in ROLES:
            raise ConfigError(f"role must be one of {', '.join(ROLES)}, got {self.role!r}")
        if self.role != "both" and not LANE_POLICIES[self.policy].separate_lanes:
            raise ConfigError(f"role={self.role} needs policy full or lanes (sync and sync2 run both stages "
                              f"in one loop), got policy={self.policy}")
        if self.admission not in ADMISSIONS:
            raise ConfigError(f"admission must be one of {', '.join(ADMISSIONS)}, got {self.admission!r}")
        if self.executor not in ("auto", "cpu", "sim", "cuda"):
            raise ConfigError(f"executor must be auto, cpu, sim or cuda, got {self.executor!r}")
        for name in ("urgent_buckets", "background_buckets", "decode_buckets"):
            b = getattr(self, name)
            if not b or list(b) != sorted(set(b)) or b[0] < 1:
                raise ConfigError(f"{name} must be increasing positive sizes, got {b}")
        positive = ("background_min_batch", "max_running", "max_queue", "kv_page_size", "kv_pages",
                    "codec_slots", "max_frames", "max_prefill_batch", "max_prefill_tokens")
        for name in positive:
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("urgent_margin_s", "max_defer_s", "ttfa_target_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"{name} must be a finite number of seconds >= 0, got {value}")
        if not (math.isfinite(self.prepare_limit_s) and self.prepare_limit_s > 0):
            raise ConfigError(f"prepare_limit_s must be a finite number of seconds > 0, got "
                              f"{self.prepare_limit_s}")
        if not (math.isfinite(self.codec_state_gb) and self.codec_state_gb >= 0):
            raise ConfigError(f"codec_state_gb must be a finite number of GB >= 0 (0 = no cap), got "
                              f"{self.codec_state_gb}")
        if not 0 <= self.memory_fraction <= 1:
            raise ConfigError(f"memory_fraction must be a share from 0 to 1 (0 = the device default), got "
                              f"{self.memory_fraction}")
        for name in ("threads", "seed", "lm_sms", "codec_sms"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        cpus = machine_cpus()
        if self.threads > cpus:  # torch aborts (SIGSEGV) on absurd thread counts: refuse them first
            raise ConfigError(f"threads must be at most {cpus} (the CPUs this process may use), got "
                              f"{self.threads}; omit it (0) for torch's default")
        if self.dtype not in DTYPES:
            raise ConfigError(f"dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if not _DEVICE.fullmatch(self.device):
            raise ConfigError(f"device must be cpu, cuda or cuda:N (or auto), got {self.device!r}")
        if self.chunk is not None:
            if not isinstance(self.chunk, ChunkSchedule):
                raise ConfigError(f"chunk must be a chunk schedule (first, ramp, steady), got {self.chunk!r}")
            try:
                self.chunk.validate()
            except ValueError as e:  # the seam's schedule raises ValueError; a config mistake is ours
                raise ConfigError(str(e)) from None
        return self

    def chunk_or(self, model_default: ChunkSchedule) -> ChunkSchedule:
        """The chunk schedule in force: the explicit one, else the model's default."""
        return self.chunk if self.chunk is not None else model_default

    def replace(self, **changes: Any) -> EngineConfig:
        return dataclasses.replace(self, **changes).validate()

    def with_overrides(self, overrides: dict[str, Any] | list[str] | None) -> EngineConfig:
        """Apply `{"key": value}` or `["key=value", ...]` (CLI `--set`); `chunk.first=2` reaches
        into the chunk schedule. Values from strings are parsed as TOML scalars/arrays. Setting any chunk
        field makes the schedule explicit: fields not given keep the current explicit schedule's values,
        or ChunkSchedule's defaults (first 4, no ramp, steady 10) when it was the model's default."""
        if not overrides:
            return self
        if isinstance(overrides, list):
            overrides = dict(_parse_assignment(s) for s in overrides)
        return _merge(self, overrides)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def machine_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one, else all of them)."""
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _parse_assignment(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise ConfigError(f"override {text!r} is not of the form key=value")
    key, raw = text.split("=", 1)
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw  # a bare word such as `policy=sync`
    return key.strip(), value


def _merge(cfg: EngineConfig, values: dict[str, Any]) -> EngineConfig:
    known = {f.name: f for f in dataclasses.fields(EngineConfig)}
    changes: dict[str, Any] = {}
    chunk_changes: dict[str, Any] = {}
    for key, value in values.items():
        key = key.replace("-", "_")
        if key.startswith("chunk."):
            chunk_changes[key.split(".", 1)[1]] = value
            continue
        if key == "chunk":
            if not isinstance(value, dict):
                raise ConfigError(f"chunk is a table, got {value!r}: set chunk.first, chunk.ramp and/or "
                                  "chunk.steady (frames)")
            chunk_changes.update(value)
            continue
        if key not in known:
            raise ConfigError(f"unknown setting {key!r}; known settings: {', '.join(sorted(known))}")
        current = getattr(cfg, key)
        if isinstance(current, tuple):
            value = tuple(value) if isinstance(value, list | tuple) else (value,)
        elif isinstance(current, bool):
            value = bool(value)
        elif isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        elif type(current) is not type(value) and not (isinstance(current, str) and isinstance(value, str)):
            kind = type(current).__name__
            raise ConfigError(f"setting {key!r} wants a value of type {kind}, got {value!r}")
        changes[key] = value
    if chunk_changes:
        chunk_fields = {f.name for f in dataclasses.fields(ChunkSchedule)}
        bad = set(chunk_changes) - chunk_fields
        if bad:
            raise ConfigError(f"unknown chunk setting(s) {sorted(bad)}; known: {sorted(chunk_fields)}")
        if isinstance(chunk_changes.get("ramp"), list):
            chunk_changes["ramp"] = tuple(chunk_changes["ramp"])
        changes["chunk"] = dataclasses.replace(cfg.chunk or ChunkSchedule(), **chunk_changes)
    return dataclasses.replace(cfg, **changes).validate()


def _cuda_available() -> bool:
    import torch  # noqa: PLC0415 - only when a config is resolved, never at import

    return bool(torch.cuda.is_available())


def resolve_auto(cfg: EngineConfig, *, check: bool = True,
                 cuda_available: Any = _cuda_available) -> EngineConfig:
    """Turn `executor`/`device`/`dtype` "auto" into concrete values: the cuda executor on "cuda" when torch
    sees a CUDA device, else the cpu executor on "cpu"; an explicit device decides an auto executor
    and an explicit executor decides an auto device. With `check`, an explicit cuda executor or
    device on a machine without CUDA is a ConfigError (one sentence), before any model load."""
    executor, device = cfg.executor, cfg.device
    if executor == "auto":
        if device != "auto":
            executor = "cuda" if device.startswith("cuda") else "cpu"
        else:
            executor = "cuda" if cuda_available() else "cpu"
    if device == "auto":
        device = "cuda" if executor == "cuda" else "cpu"
    if check and (executor == "cuda" or device.startswith("cuda")) and not cuda_available():
        what = "executor=cuda" if executor == "cuda" else f"device={device}"
        raise ConfigError(f"{what} needs a CUDA GPU and torch sees none on this machine; use "
                          "executor=cpu (or executor=sim with gpu=h100) here")
    dtype = resolve_dtype(cfg.dtype, device)
    if (executor, device, dtype) == (cfg.executor, cfg.device, cfg.dtype):
        return cfg
    return cfg.replace(executor=executor, device=device, dtype=dtype)


def cpu_has_fast_bf16(cpuinfo: Path = Path("/proc/cpuinfo")) -> bool:
    """True when the host CPU has bfloat16 dot-product instructions (AVX512-BF16 or AMX-BF16)."""
    try:
        text = cpuinfo.read_text()
    except OSError:
        return False
    lines = (line for line in text.splitlines() if line.startswith("flags"))
    flags = next((line.split(":", 1)[1].split() for line in lines), [])
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_dtype(dtype: str, device: str, fast_bf16: Any = cpu_has_fast_bf16) -> str:
    """A concrete dtype for `device` (a resolved one): "auto" is bfloat16 on CUDA and on a CPU with
    bfloat16 instructions (`fast_bf16()`), else float32; any other value is kept."""
    if dtype != "auto":
        return dtype
    return "bfloat16" if device.startswith("cuda") or fast_bf16() else "float32"


def recipe_path(name: str) -> Path:
    """A recipe by file path, or by name inside the shipped `recipes/` package."""
    p = Path(name)
    if p.suffix == ".toml" and p.exists():
        return p
    shipped = resources.files("voxcli.recipes")
    for candidate in (f"{name}.toml", name):
        ref = shipped.joinpath(candidate)
        if ref.is_file():
            return Path(str(ref))
    if p.suffix == ".toml" or "/" in name:  # meant as a file
        raise ConfigError(f"recipe file {name} does not exist; give a TOML file or a shipped recipe name")
    raise ConfigError(f"no recipe named {name!r} (looked for a file and in voxcli/recipes)")


def recipe_for_model(model: str) -> str | None:
    """The shipped recipe for `model` when the user names none (`--recipe` always wins): what the model's
    family registers for its demo alias or hub id (voxcli/models/registry.py), if anything."""
    from voxcli.models.registry import recipe_for

    return recipe_for(model)


def load_recipe(name: str | None, overrides: dict[str, Any] | list[str] | None = None) -> EngineConfig:
    """Defaults, then the recipe's `[engine]` table (or its top level), then overrides."""
    cfg = EngineConfig()
    if name:
        path = recipe_path(name)
        try:
            data = tomllib.loads(path.read_text())
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"recipe {path} is not valid TOML: {e}") from e
        cfg = _merge(cfg, data.get("engine", {k: v for k, v in data.items() if not isinstance(v, dict)
                                              or k == "chunk"}))
    return cfg.with_overrides(overrides).validate()


def model_recipe_config(model: str) -> tuple[EngineConfig, str | None]:
    """The settings `model` runs with when the user names no recipe, and the recipe they come from, as the
    session layer picks them (voxcli/session.py `engine_config`, before executor, gpu and --set): its
    family's registered recipe with `model` in it; else the shipped recipe the name itself names (the
    sim's `qwen3-tts-1.7b`: that recipe's checkpoint); else the defaults with `model` (recipe None)."""
    recipe = recipe_for_model(model)
    if recipe is not None:
        return load_recipe(recipe).replace(model=model), recipe
    try:
        recipe_path(model)
    except ConfigError:
        return EngineConfig(model=model).validate(), None
    return load_recipe(model), model


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, str):
        import json

        return json.dumps(value)  # a TOML basic string: the same escapes as JSON's
    return repr(value)


def recipe_toml(cfg: EngineConfig, always: tuple[str, ...] = ("model",)) -> str:
    """`cfg` as a recipe's `[engine]` table: every setting that differs from EngineConfig's defaults (and
    those named in `always`), the chunk schedule when it is explicit. `load_recipe` of the text gives
    `cfg` back exactly (a round trip: the tests check it)."""
    defaults = EngineConfig()
    lines = ["[engine]"]
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if f.name == "chunk" or (value == getattr(defaults, f.name) and f.name not in always):
            continue
        lines.append(f"{f.name} = {_toml_value(value)}")
    if cfg.chunk is not None:
        lines += ["", "[engine.chunk]"] + [f"{k} = {_toml_value(v)}"
                                           for k, v in dataclasses.asdict(cfg.chunk).items()]
    return "\n".join(lines) + "\n"
