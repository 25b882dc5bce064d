"""The engine session a server runs: the CLI's own (a model on cpu/cuda), or a real-time simulated GPU.

`--executor sim` serves the sim's SyntheticProgram (audio of the right length, silent) on
`RealtimeSimExecutor`, which advances the profiled device with the wall clock; `--model` then names a
model recipe (qwen3-tts-1.7b) whose engine settings apply, and `--gpu` the cost profile.
"""

from __future__ import annotations

from typing import Any

from voxcli.config import ConfigError


def sim_config(model: str, gpu: str, sets: list[str] | None = None, policy: str | None = None) -> Any:
    """The simulated server's engine settings, checked (cheap: no model, no device)."""
    from voxcli.bench.targets import model_config

    if not gpu:
        raise ConfigError("--executor sim needs --gpu h100, h200 or b200 (the cost profile to simulate).")
    config = model_config(model, "sim", gpu, sets)
    return config.replace(policy=policy) if policy else config


def sim_session(model: str, gpu: str, sets: list[str] | None = None, policy: str | None = None,
                role: str = "both", pcm_scale: float = 0.0) -> Any:
    """`role` lm or codec: a role engine of a disaggregated placement (engine/roles.py); `pcm_scale`: the
    sim's audio (frame index x scale; 0 = silence), for tests that read back which frames were heard."""
    from voxcli.cli import Session
    from voxcli.engine.estimates import load_profile
    from voxcli.engine.executors.realtime_sim import RealtimeSimExecutor
    from voxcli.engine.lanes import lane_layout
    from voxcli.engine.synthetic import SyntheticProgram

    config = sim_config(model, gpu, sets, policy).replace(role=role)
    # the model family's audio shape and sim chunk schedule, unless the recipe/--set gives one
    program = SyntheticProgram.for_model(config.model, pcm_scale=pcm_scale)
    profile = load_profile(config)
    executor = RealtimeSimExecutor(program, profile, lane_layout(config))
    engine = _engine_class(role)(program, config, executor=executor, profile=profile)
    return Session(engine=engine, spec=program.spec, model=model, check=program.check)


def _engine_class(role: str) -> Any:
    if role == "both":
        from voxcli.engine.engine import Engine

        return Engine
    from voxcli.engine.roles import CodecEngine, LMEngine

    return {"lm": LMEngine, "codec": CodecEngine}[role]


def session_config(model: str | None, executor: str | None, gpu: str, recipe: str | None, sets: list[str],
                   policy: str | None, device: str | None) -> Any:
    """The server's engine settings from its flags, checked without loading anything: every flag
    mistake is reported before the port is probed and before the model loads."""
    if executor == "sim":
        if recipe:
            raise ConfigError("--recipe does not apply to --executor sim; --model names the recipe there.")
        return sim_config(model or "qwen3-tts-1.7b", gpu, sets, policy)
    from voxcli import cli

    return cli.build_config(cli.EngineOptions(model, recipe, sets, policy, executor, device))


def open_session(model: str | None, executor: str | None, gpu: str, recipe: str | None, sets: list[str],
                 policy: str | None, device: str | None, role: str = "both", pcm_scale: float = 0.0) -> Any:
    """A `voxcli.cli.Session` for the server (loads the model; may take a while); `role`: see sim_session."""
    if executor == "sim":
        session_config(model, executor, gpu, recipe, sets, policy, device)  # the --recipe check
        return sim_session(model or "qwen3-tts-1.7b", gpu, sets, policy, role, pcm_scale)
    from voxcli import cli

    config = session_config(model, executor, gpu, recipe, sets, policy, device)
    if role == "both":
        return cli.engine_factory(config)
    from voxcli.models import load_model

    config = config.replace(role=role)
    program = load_model(config.model, config.device, config.dtype)
    return cli.Session(engine=_engine_class(role)(program, config), spec=program.spec, model=config.model,
                       check=program.check, backend=f"{config.executor} executor on {config.device} ({role})")
