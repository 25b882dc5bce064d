"""The one config object: recipes, overrides, validation errors that name the key."""

from __future__ import annotations

import pytest

from voxcli.config import ChunkSchedule, ConfigError, EngineConfig, load_recipe, recipe_for_model


def test_overrides_parse_toml_values_and_reach_the_chunk_schedule():
    cfg = EngineConfig().with_overrides(
        ["policy=sync", "background_min_batch=4", "urgent_margin_s=0.05", "chunk.first=2",
         "chunk.ramp=[3, 4]", "urgent_buckets=[1, 2]"])
    assert cfg.policy == "sync" and cfg.background_min_batch == 4 and cfg.urgent_margin_s == 0.05
    assert cfg.chunk == ChunkSchedule(first=2, ramp=(3, 4), steady=10)
    assert cfg.urgent_buckets == (1, 2)
    assert [cfg.chunk.size(i) for i in range(5)] == [2, 3, 4, 10, 10]


@pytest.mark.parametrize("override, needle", [
    (["polcy=sync"], "unknown setting 'polcy'"),
    (["policy=fast"], "policy must be one of"),
    (["background_min_batch=0"], "background_min_batch must be >= 1"),
    (["urgent_buckets=[4, 2]"], "urgent_buckets must be increasing"),
    (["chunk.first=0"], "chunk.first must be a whole number of frames >= 1"),
    (["chunk.first=abc"], "chunk.first must be a whole number"),
    (["chunk.ramp=5"], "chunk.ramp must be a list"),
    (["chunk.ramp=[2, 0.5]"], "chunk.ramp must be a whole number"),
    (["threads=-4"], "threads must be >= 0"),
    (["dtype=bogus"], "dtype must be one of auto, float32, bfloat16, float16"),
    (["device=tpu"], "device must be cpu, cuda or cuda:N"),
    (["urgent_margin_s=nan"], "urgent_margin_s must be a finite number"),
    (["max_defer_s=inf"], "max_defer_s must be a finite number"),
    (["kv_pages=true"], "kv_pages"),
    (["urgent_buckets=[1, true]"], "urgent_buckets must be a list of whole numbers"),
    (["chunk.size=3"], "unknown chunk setting"),
    (["max_queue=many"], "wants a value of type int"),
    (["policy"], "not of the form key=value"),
])
def test_bad_overrides_name_the_key(override, needle):
    with pytest.raises(ConfigError, match=needle):
        EngineConfig().with_overrides(override)


@pytest.mark.parametrize("name", ["demo", "qwen3-tts-0.6b", "qwen3-tts-1.7b"])
def test_shipped_recipes_load(name):
    cfg = load_recipe(name)
    assert cfg.validate() is cfg
    assert load_recipe(name, ["policy=sync2"]).policy == "sync2"


def test_unknown_recipe_is_a_clear_error():
    with pytest.raises(ConfigError, match="no recipe named 'nope'"):
        load_recipe("nope")


def test_models_get_their_own_recipe():
    assert recipe_for_model("demo") == "demo"
    assert recipe_for_model("Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice") == "qwen3-tts-0.6b"
    assert recipe_for_model("Qwen/Qwen3-TTS-12Hz-1.7B-Base") == "qwen3-tts-1.7b"
    assert recipe_for_model("/some/local/checkpoint") is None


# ---------------------------------------------------------------- executor / device "auto"
@pytest.mark.parametrize(("executor", "device", "gpu", "want"), [
    ("auto", "auto", True, ("cuda", "cuda")),
    ("auto", "auto", False, ("cpu", "cpu")),
    ("auto", "cpu", True, ("cpu", "cpu")),
    ("auto", "cuda:1", True, ("cuda", "cuda:1")),
    ("cpu", "auto", True, ("cpu", "cpu")),
    ("sim", "auto", False, ("sim", "cpu")),
    ("cuda", "auto", True, ("cuda", "cuda")),
])
def test_auto_executor_and_device_follow_the_machine(executor, device, gpu, want):
    from voxcli.config import resolve_auto

    cfg = resolve_auto(EngineConfig(executor=executor, device=device), cuda_available=lambda: gpu)
    assert (cfg.executor, cfg.device) == want


@pytest.mark.parametrize(("executor", "device", "named"), [("cuda", "auto", "executor=cuda"),
                                                           ("cpu", "cuda", "device=cuda")])
def test_asking_for_cuda_without_a_gpu_is_one_sentence(executor, device, named):
    from voxcli.config import resolve_auto

    with pytest.raises(ConfigError) as e:
        resolve_auto(EngineConfig(executor=executor, device=device), cuda_available=lambda: False)
    msg = str(e.value)
    assert msg.startswith(named) and "torch sees none" in msg and msg.count(". ") == 0


def test_the_engine_resolves_auto_to_where_the_program_lives(monkeypatch):
    import torch

    from voxcli.engine.engine import Engine
    from voxcli.sim.synthetic import SyntheticProgram

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # even on a GPU machine...
    with Engine(SyntheticProgram(), EngineConfig()) as eng:  # ...a host-only program runs on the cpu
        assert (eng.config.executor, eng.config.device) == ("cpu", "cpu")
