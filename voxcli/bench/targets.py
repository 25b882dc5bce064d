"""Build the bench target for a policy variant: the in-process engine on the sim (virtual time) or on a
real-clock executor (cpu, cuda)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from voxcli.bench.client import EngineTarget, SimTarget, Target
from voxcli.bench.sweep import Variant
from voxcli.config import ConfigError, EngineConfig
from voxcli.session import EngineOptions, engine_config, open_session


def model_config(
    model: str | None, executor: str, gpu: str = "", overrides: list[str] | None = None,
    recipe: str | None = None,
) -> EngineConfig:
    """Engine settings for `model` on `executor` (and the sim's `gpu` profile), `--set` overrides applied:
    the session layer's (`voxcli.session.engine_config`), so a bench measures what `vox say` and `vox
    serve` run. `model` is a checkpoint (path, hub id, demo alias) or a model recipe (`qwen3-tts-1.7b`);
    `recipe` (a TOML file or shipped recipe name) replaces the model's own recipe. On the sim a recipe
    names its model (as `--model qwen3-tts-1.7b` does): a `model` beside it must be the same one."""
    sets = tuple(overrides or ())
    if recipe is None or executor != "sim":
        return engine_config(EngineOptions(model=model, recipe=recipe, executor=executor, gpu=gpu, sets=sets))
    config = engine_config(EngineOptions(model=recipe, executor=executor, gpu=gpu, sets=sets))
    if model is not None:
        named = engine_config(EngineOptions(model=model, executor=executor, gpu=gpu, sets=sets)).model
        if named != config.model:
            raise ConfigError(f"--model {model} is {named} but --recipe {recipe} runs {config.model}; give "
                              "one of them (the recipe names its model)")
    return config


def sim_target(config: EngineConfig, variant: Variant, seed: int = 0, profile: Any = None) -> Target:
    """The engine on the sim executor; `profile` (a CostProfile) replaces recipes/gpus/<gpu>.toml."""
    if not config.gpu and profile is None:
        raise ConfigError("the sim executor needs a GPU cost profile: pass --gpu h100|h200|b200")
    cfg = config.with_overrides(variant.overrides)

    def make() -> Any:
        # The stand-in has the model family's audio shape and, unless the recipe/--set gives a chunk
        # schedule, the family's sim schedule (the one the GPU profiles in recipes/gpus/ assume).
        return open_session(cfg, profile=profile, wall_clock=False).engine

    return SimTarget(make, variant.label, seed)


def engine_target(config: EngineConfig, variant: Variant, seed: int = 0, program: Any = None) -> Target:
    """A real-clock engine; `program` (already loaded) is shared between variants to save the load."""
    session = open_session(config.with_overrides(variant.overrides), program=program)
    voices = session.spec.voices
    return EngineTarget(session.engine, variant.label, seed, voice=voices[0] if voices else None)


def dilate(config: EngineConfig, factor: float) -> EngineConfig:
    """Engine settings for a world `factor` times slower (see `DilatedProgram`)."""
    return config.replace(
        ttfa_target_s=config.ttfa_target_s * factor,
        urgent_margin_s=config.urgent_margin_s * factor,
        max_defer_s=config.max_defer_s * factor,
    )


def dilated_program(program: Any, factor: float) -> Any:
    """The program with its sample rate divided by `factor`: every audio sample then "plays" `factor`
    times longer, so frame durations, playback deadlines and the modelled player all run on a clock
    `factor` times slower. A CPU that cannot produce audio in real time can then still be measured for
    what the scheduler does with it (sync vs full); the SLO thresholds are scaled by the same factor and
    the report says so. factor 1 = the real SLO."""
    import dataclasses

    from voxcli.models.base import ModelProgram

    if factor == 1.0:
        return program
    spec = dataclasses.replace(program.spec, sample_rate=program.spec.sample_rate / factor)

    class Dilated(ModelProgram):
        @classmethod
        def load(cls, source: str, device: str = "cpu", dtype: str = "float32") -> ModelProgram:
            raise NotImplementedError("a dilated program wraps an already loaded one")

        def prepare(self, request):  # type: ignore[no-untyped-def]
            return program.prepare(request)

        def set_limits(self, limits) -> None:  # type: ignore[no-untyped-def]
            program.set_limits(limits)

        def init_kv(self, num_pages: int, page_size: int) -> None:
            program.init_kv(num_pages, page_size)

        def init_codec_slots(self, num_slots: int) -> None:
            program.init_codec_slots(num_slots)

        def kv_tokens(self, prompt):  # type: ignore[no-untyped-def]
            return program.kv_tokens(prompt)

        def prefill(self, rows):  # type: ignore[no-untyped-def]
            return program.prefill(rows)

        def decode(self, rows):  # type: ignore[no-untyped-def]
            return program.decode(rows)

        def codec(self, items):  # type: ignore[no-untyped-def]
            return program.codec(items)

        def release(self, row) -> None:  # type: ignore[no-untyped-def]
            program.release(row)

    d = Dilated()
    d.spec = spec
    return d


def cpu_bench_checkpoint(cache: Path) -> Path:
    """The `cpu-bench` Qwen3-TTS size (random weights), built once into `cache`."""
    from voxcli.models.registry import find_tiny

    out = cache / "qwen3-tts-cpu-bench"
    if not (out / "config.json").exists():
        find_tiny("qwen3_tts").build(out, variant="custom_voice", size="cpu-bench")  # type: ignore[union-attr]
    return out
