"""The session layer: the one place where a model and its options become a running engine.

Every front end opens engines here and nowhere else: the CLI (`vox say`, `vox batch`), `vox serve`, the
Ray replicas (`voxcli.cluster`), the bench's targets and the Python API (`voxcli.api`). Data flows one
way: front ends -> this layer -> engine -> executors -> models; nothing here imports a front end.

    EngineOptions    what a user chooses (the CLI's flags, `voxcli.load`'s keywords, a replica's spec)
    serving_options  the options `vox serve` and its Ray replicas run with
    engine_config    options -> checked EngineConfig, without loading anything (flag mistakes first);
                     runnable_config adds what opening needs (the sim: a cost profile)
    open_session     options or a config -> Session: the model loaded (or the simulated GPU), an engine
    Session          the engine with what a front end needs beside it (spec, model name, request check),
                     and `Session.speak`: the one way a front end turns text into audio

Settings from options, in order: the recipe (`recipe=`; else the one the model's family registers for
it; else the shipped recipe the model names, as the sim's `--model qwen3-tts-1.7b` does; else the
defaults), `admission=` (offline synthesis queues every request), `sets` (key=value) and `dtype=`, then
model/policy/executor/device/gpu. A model named by its recipe keeps the recipe's checkpoint; a cpu or
cuda executor without a device puts the model where the executor runs. No model named: the registry's
default (`models.registry.default_model`). Imports stay light (no torch) until a session opens; tests
replace `engine_factory` to run every front end over another engine.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from voxcli.config import EngineConfig
    from voxcli.engine.engine import Engine
    from voxcli.models.base import ModelProgram, ModelSpec, SynthesisRequest
    from voxcli.sim.cost import CostProfile
    from voxcli.speak import RequestTemplate, SpeechStats
    from voxcli.speak_choice import SpeakOptions
    from voxcli.speech_engine import SpeechEngine
    from voxcli.text_phase import TextRouter


@dataclass
class Session:
    """An open engine and what a front end needs beside it. `speak` is the one way any front end turns
    a text into audio (voxcli/speak_choice.py says how)."""

    engine: SpeechEngine
    spec: ModelSpec
    model: str
    # The model's cheap request check (ModelProgram.check): voice, language, options... before synthesis.
    check: Callable[[SynthesisRequest], None]
    backend: str = ""  # "cuda executor on cuda" / "cpu executor on cpu", shown in the timing line
    _text: TextRouter | None = field(default=None, init=False, repr=False)
    _text_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def check_fields(self, template: RequestTemplate) -> None:
        """The model's check of the request fields alone (voice, language, options...), before any text
        exists: a placeholder text stands in. Raises the model's InputError."""
        from voxcli.speak_choice import PLACEHOLDER_TEXT

        self.check(template.request(PLACEHOLDER_TEXT))

    @property
    def writes_text(self) -> bool:
        """Whether the model writes text before it speaks (its text phase: `on_text` can show it)."""
        program = self.engine.program
        return program is not None and program.text_written is not None

    def speak(self, source: str | Iterable[str], template: RequestTemplate,
              on_audio: Callable[[np.ndarray], None], stop: threading.Event | None = None,
              options: SpeakOptions | None = None) -> SpeechStats:
        """Speak `source` (a whole text, or its fragments as they arrive) with `template`'s request fields,
        calling `on_audio(pcm)` for every chunk in order. Chooses fed / sentence by sentence / whole and
        the frame cap (a demo model's: speak_choice.frame_cap); `options.on_text` gets the text the model
        writes (NoTextPhase for a model that writes none). Raises SpeechFailed (its cause: the engine's or
        model's error), the model's InputError from its check, or Stopped once `stop` is set."""
        from voxcli.speak_choice import SpeakOptions, speak_source

        options = options or SpeakOptions()
        return speak_source(self.engine, self.spec, self.model, self.check, self._router(options), source,
                            template, on_audio, stop, options)

    def speak_prepared(self, requests: Sequence[SynthesisRequest], on_audio: Callable[[np.ndarray], None],
                       stop: threading.Event | None = None,
                       options: SpeakOptions | None = None) -> SpeechStats:
        """Requests another session already shaped (a Ray replica speaking its driver's segment), as is."""
        from voxcli.speak_choice import SpeakOptions, speak_prepared

        options = options or SpeakOptions()
        return speak_prepared(self.engine, self.spec.sample_rate, self._router(options), requests, on_audio,
                              stop, options)

    def _router(self, options: SpeakOptions) -> TextRouter | None:
        """The session's text router, installed on the program's text events the first time a caller
        wants the text."""
        if options.on_text is None:
            return None
        from voxcli.text_phase import TextRouter, no_text_phase

        program = self.engine.program
        events = program.text_written if program is not None else None
        if events is None:
            raise no_text_phase(self.model)
        with self._text_lock:
            if self._text is None:
                self._text = TextRouter(events)
            return self._text

    def close(self) -> None:
        self.engine.close()


@dataclass(frozen=True)
class EngineOptions:
    """A user's engine choices; None = the recipe's (or the default) value."""

    model: str | None = None  # hub id, checkpoint folder, demo alias, or (sim) a model recipe name
    recipe: str | None = None  # shipped recipe name or TOML file
    sets: Sequence[str] = ()  # `--set key=value` overrides
    policy: str | None = None
    executor: str | None = None  # cpu, cuda, sim (auto: cuda when torch sees a GPU)
    device: str | None = None
    gpu: str = ""  # the sim's cost profile (h100, h200, b200)
    dtype: str | None = None  # same as a `dtype=` set
    admission: str | None = None  # replaces the recipe's admission policy, before `sets`

    @staticmethod
    def sets_from(settings: Mapping[str, Any] | Sequence[str] | None) -> tuple[str, ...]:
        """`{"policy": "sync"}` or `["policy=sync"]` -> the `--set` strings the config parses."""
        if settings is None:
            return ()
        if isinstance(settings, str):  # one "key=value", not its characters
            return (settings,)
        if isinstance(settings, Mapping):
            return tuple(f"{k}={_set_value(v)}" for k, v in settings.items())
        return tuple(settings)


def _set_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_set_value(v) for v in value) + "]"
    return str(value)


def serving_options(model: str | None, executor: str | None, gpu: str, recipe: str | None,
                    sets: Sequence[str], policy: str | None, device: str | None) -> EngineOptions:
    """What `vox serve` and each of its Ray replicas run: a real model queues every request (admission
    deadline), as `vox say` does; the simulated GPU keeps its recipe's admission (the TTFA gate)."""
    return EngineOptions(model=model, recipe=recipe, sets=tuple(sets), policy=policy, executor=executor,
                         device=device, gpu=gpu, admission=None if executor == "sim" else "deadline")


def engine_config(o: EngineOptions, resolve_devices: bool = True) -> EngineConfig:
    """The engine settings `o` asks for, checked without loading a model or touching a device: every
    mistake in the options is a ConfigError (one sentence) before anything slow starts. `resolve_devices
    =False` leaves "auto" executor/device/dtype unresolved (resolving asks torch for a GPU: seconds)."""
    from voxcli.config import ConfigError, load_recipe, recipe_for_model, recipe_path, resolve_auto
    from voxcli.models.registry import default_model, families

    simulated = o.executor == "sim"
    if simulated and o.recipe:
        raise ConfigError("--recipe does not apply to --executor sim; --model names the recipe there.")
    model = o.model or default_model(simulated)
    recipe = o.recipe or recipe_for_model(model)
    names_recipe = False  # the model is a shipped recipe's name (qwen3-tts-1.7b): the recipe names the model
    if recipe is None:
        try:
            recipe_path(model)
            recipe, names_recipe = model, True
        except ConfigError:
            if simulated:
                names = ", ".join(s.name for f in families() for s in f.sim.models)
                raise ConfigError(f"no recipe named {model!r} for the simulator: use a model recipe "
                                  f"({names}; recipes/*.toml)") from None
    cfg = load_recipe(recipe)
    if o.admission is not None:
        cfg = cfg.replace(admission=o.admission)
    sets = [*o.sets, *([f"dtype={o.dtype}"] if o.dtype is not None else [])]
    cfg = cfg.with_overrides(sets).validate()
    changes: dict[str, Any] = {k: v for k, v in (("policy", o.policy), ("executor", o.executor),
                                                 ("device", o.device)) if v is not None}
    if o.model is not None and not names_recipe:
        changes["model"] = o.model
    if o.gpu:
        changes["gpu"] = o.gpu
    if o.device is None and o.executor in ("cpu", "cuda") and not cfg.device.startswith(o.executor):
        changes["device"] = o.executor  # the model lives where the executor runs (a set may pick cuda:N)
    cfg = cfg.replace(**changes) if changes else cfg
    return cfg if simulated or not resolve_devices else resolve_auto(cfg)


def runnable_config(o: EngineOptions) -> EngineConfig:
    """`engine_config` plus what opening it needs beyond valid settings (the sim: a cost profile)."""
    return _check_runnable(engine_config(o))


def _check_runnable(config: EngineConfig, profile: CostProfile | None = None) -> EngineConfig:
    if config.executor == "sim" and not config.gpu and profile is None:
        from voxcli.config import ConfigError

        raise ConfigError("--executor sim needs --gpu h100, h200 or b200 (the cost profile to simulate; a "
                          "command without --gpu takes --set gpu=h100).")
    return config


def default_engine_factory(config: EngineConfig) -> Session:
    """Load the model and start an engine on it (the cpu executor unless the config says otherwise)."""
    from voxcli.models_cmd import ensure_available

    ensure_available(config.model)
    from voxcli.models import load_model

    if config.threads:
        import torch

        torch.set_num_threads(config.threads)
    return _program_session(load_model(config.model, config.device, config.dtype), config)


# Tests may replace this (monkeypatch) to run every front end over a different engine.
engine_factory: Callable[[EngineConfig], Session] = default_engine_factory


def open_session(options: EngineOptions | EngineConfig, role: str = "both", pcm_scale: float = 0.0, *,
                 program: ModelProgram | None = None, profile: CostProfile | None = None,
                 wall_clock: bool = True) -> Session:
    """A Session on the model and engine `options` ask for (loads the model; may take a while).

    `role` lm or codec: a role engine of a disaggregated placement (engine/roles.py); `pcm_scale`: the
    sim's audio (frame index x scale; 0 = silence), for tests that read back which frames were heard.
    For the bench: `program`, an already loaded ModelProgram to run (shared by the variants of a sweep);
    `profile`, a CostProfile in place of recipes/gpus/<gpu>.toml; `wall_clock=False`, the sim on a virtual
    clock (a capacity run that takes no wall time) instead of advancing with the wall clock."""
    from voxcli.config import EngineConfig

    if isinstance(options, EngineConfig):
        config = _check_runnable(options, profile)
    else:
        config = _check_runnable(engine_config(options), profile)
    if config.executor == "sim":  # named as the user named it (a model recipe), not by its checkpoint
        from voxcli.models.registry import default_model

        name = (options.model or default_model(True)) if isinstance(options, EngineOptions) else config.model
        return _sim_session(config.replace(role=role), pcm_scale, name, profile, wall_clock)
    if program is None and role == "both":
        return engine_factory(config)
    if program is None:
        from voxcli.models import load_model

        program = load_model(config.model, config.device, config.dtype)
    return _program_session(program, config.replace(role=role))


def _program_session(program: ModelProgram, config: EngineConfig) -> Session:
    """An engine of `config.role` over a loaded model program."""
    from voxcli.engine.admission_check import program_check

    role = "" if config.role == "both" else f" ({config.role})"
    return Session(engine=_engine_class(config.role)(program, config), spec=program.spec, model=config.model,
                   check=program_check(program),
                   backend=f"{config.executor} executor on {config.device}{role}")


@contextlib.contextmanager
def opened(options: EngineOptions | EngineConfig) -> Iterator[Session]:
    """`open_session` for a `with` block: the engine is closed on the way out."""
    session = open_session(options)
    try:
        yield session
    finally:
        session.close()


def _sim_session(config: EngineConfig, pcm_scale: float, name: str, profile: CostProfile | None,
                 wall_clock: bool) -> Session:
    """The sim's SyntheticProgram (audio of the right length; frame index x `pcm_scale`) on the profiled
    device: advanced by the wall clock (RealtimeSimExecutor, what `vox serve --executor sim` runs) or, for
    the bench, by the engine's own virtual clock."""
    from voxcli.engine.admission_check import program_check
    from voxcli.sim.synthetic import SyntheticProgram

    # the model family's audio shape and sim chunk schedule, unless the recipe/--set gives one
    program = SyntheticProgram.for_model(config.model, pcm_scale=pcm_scale)
    engine_class = _engine_class(config.role)
    if not wall_clock:
        engine = engine_class(program, config, profile=profile)
    else:
        from voxcli.engine.estimates import load_profile
        from voxcli.engine.lanes import lane_layout
        from voxcli.sim.realtime_executor import RealtimeSimExecutor

        profile = profile if profile is not None else load_profile(config)
        executor = RealtimeSimExecutor(program, profile, lane_layout(config))
        engine = engine_class(program, config, executor=executor, profile=profile)
    return Session(engine=engine, spec=program.spec, model=name, check=program_check(program),
                   backend=f"sim executor on a simulated {config.gpu or 'device'}")


def _engine_class(role: str) -> type[Engine]:
    if role == "both":
        from voxcli.engine.engine import Engine

        return Engine
    from voxcli.engine.roles import CodecEngine, LMEngine

    return {"lm": LMEngine, "codec": CodecEngine}[role]


def sim_session(model: str, gpu: str, sets: Sequence[str] | None = None, policy: str | None = None,
                role: str = "both", pcm_scale: float = 0.0) -> Session:
    """The real-time simulated `gpu` serving model recipe `model` (what `vox serve --executor sim` runs)."""
    return open_session(EngineOptions(model=model, executor="sim", gpu=gpu, sets=tuple(sets or ()),
                                      policy=policy), role, pcm_scale)
