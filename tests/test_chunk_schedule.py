"""An explicit chunk schedule always wins over the model's default, even one equal to ChunkSchedule();
"not set" (None) means the model's own schedule."""

from __future__ import annotations

import pytest

from voxcli.config import ChunkSchedule, ConfigError, EngineConfig, load_recipe
from voxcli.engine.engine import Engine
from voxcli.sim.synthetic import SyntheticProgram

QWEN_DEFAULT = ChunkSchedule(first=1, ramp=(2, 4, 8), steady=10)  # what the Qwen3-TTS program declares


def engine(cfg: EngineConfig) -> Engine:
    return Engine(SyntheticProgram(chunk=QWEN_DEFAULT), cfg.replace(executor="sim"))


def test_no_schedule_means_the_models_own():
    cfg = load_recipe("qwen3-tts-0.6b")
    assert cfg.chunk is None
    assert engine(cfg).config.chunk == QWEN_DEFAULT


def test_an_explicit_schedule_equal_to_the_dataclass_default_wins():
    cfg = load_recipe("qwen3-tts-0.6b", ["chunk.first=4"])
    assert cfg.chunk == ChunkSchedule() == ChunkSchedule(first=4, ramp=(), steady=10)
    assert engine(cfg).config.chunk == ChunkSchedule()
    assert engine(EngineConfig(chunk=ChunkSchedule())).config.chunk == ChunkSchedule()


def test_recipe_chunk_tables_are_explicit_and_set_overrides_one_field():
    cfg = load_recipe("demo")
    assert cfg.chunk == ChunkSchedule(first=2, ramp=(4,), steady=8)
    cfg = cfg.with_overrides(["chunk.steady=12"])
    assert cfg.chunk == ChunkSchedule(first=2, ramp=(4,), steady=12)
    assert engine(cfg).config.chunk == cfg.chunk


def test_cli_set_reaches_the_config():
    from voxcli.cli_options import engine_options
    from voxcli.session import engine_config

    def config(sets: list[str]) -> EngineConfig:
        return engine_config(engine_options("Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice", None, sets, None, None,
                                            None, None))

    assert config(["chunk.first=4"]).chunk == ChunkSchedule(first=4)
    assert config([]).chunk is None


def test_cli_admission_is_deadline_unless_set():
    """say/batch serve every request (the shipped qwen recipe's TTFA gate is for serving); --set wins."""
    from voxcli.cli_options import engine_options
    from voxcli.config import load_recipe, recipe_for_model
    from voxcli.session import engine_config

    model = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"
    assert load_recipe(recipe_for_model(model)).admission == "ttfa-gate"
    assert engine_config(engine_options(model, None, [], None, None, None, None)).admission == "deadline"
    for key in ("admission", " admission "):
        options = engine_options(model, None, [f"{key}=ttfa-gate"], None, None, None, None)
        assert engine_config(options).admission == "ttfa-gate"


def test_chunk_is_a_table():
    with pytest.raises(ConfigError, match="chunk.first"):
        EngineConfig().with_overrides(["chunk=4"])
    with pytest.raises(ConfigError, match=">= 1"):
        EngineConfig().with_overrides(["chunk.first=0"])
