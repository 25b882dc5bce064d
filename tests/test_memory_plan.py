"""The memory plan (voxcli/engine/memory_plan.py): pinned for the real Qwen3-TTS 0.6B / 1.7B and Dia-1.6B
dimensions on 16 GB / 24 GB CPU hosts (float32, the parity dtype) and 80 GB / 24 GB GPUs (bfloat16),
arithmetic only (modules on the meta device, nothing allocated); the bounds it keeps; the device
readings; and an engine that sizes its pools by it (or refuses, in one sentence, before allocating)."""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch
from voxcli.models.codecs.dac.config import DacCodecConfig
from voxcli.models.dia import memory as dia_memory
from voxcli.models.dia.config import DecoderConfig, DiaConfig, EncoderConfig
from voxcli.models.dia.layers import DiaWeights
from voxcli.models.qwen3_tts import memory as qwen_memory
from voxcli.models.qwen3_tts.codec import CodecDecoderConfig
from voxcli.models.qwen3_tts.config import parse_config
from voxcli.models.qwen3_tts.sizes import real_config
from voxcli.models.qwen3_tts.talker import Qwen3TTSWeights
from voxcli.models.qwen3_tts.tiny_audio import speech_tokenizer_config

from voxcli.config import ConfigError, EngineConfig, load_recipe
from voxcli.engine.memory_plan import (
    Budget,
    MemoryPlanError,
    measure_budget,
    mem_available,
    plan_limits,
    plan_memory,
    workspace_bytes,
)

GB = 10**9
QWEN_CHUNK, DIA_CHUNK = 10, 48  # the largest chunk: Qwen's own schedule, the Dia recipe's steady 48


def _weight_bytes(module: torch.nn.Module, dtype: torch.dtype) -> int:
    return sum(p.numel() for p in module.parameters()) * torch.empty((), dtype=dtype).element_size()


@functools.cache
def _qwen(size: str, dtype: torch.dtype):
    cfg = parse_config(real_config(size))
    codec = CodecDecoderConfig.from_dict(speech_tokenizer_config("real")["decoder_config"])
    with torch.device("meta"):
        weights = Qwen3TTSWeights(cfg.talker)
    needs = qwen_memory.memory_needs(cfg.talker, codec, dtype, codec_loaded=False)
    return needs, _weight_bytes(weights, dtype)


@functools.cache
def _dia(dtype: torch.dtype):
    cfg = DiaConfig(EncoderConfig(), DecoderConfig())  # the defaults are Dia-1.6B's dimensions
    with torch.device("meta"):
        weights = DiaWeights(cfg)
    needs = dia_memory.memory_needs(cfg, DacCodecConfig(), dtype, guidance=3.0, codec_loaded=False)
    return needs, _weight_bytes(weights, dtype)


MODELS = {"0.6b": ("qwen3-tts-0.6b", lambda d: _qwen("0.6B", d), QWEN_CHUNK),
          "1.7b": ("qwen3-tts-1.7b", lambda d: _qwen("1.7B", d), QWEN_CHUNK),
          "dia": ("dia-1.6b", _dia, DIA_CHUNK)}
DEVICES = {"cpu16": ("cpu", 16, torch.float32), "cpu24": ("cpu", 24, torch.float32),
           "gpu80": ("cuda", 80, torch.bfloat16), "gpu24": ("cuda", 24, torch.bfloat16)}

# (KV pages of 64 positions, codec slots, what set the page count); None = one request does not fit.
PINNED = {
    ("0.6b", "cpu16"): (231, 79, "memory"),
    ("0.6b", "cpu24"): (452, 156, "memory"),
    ("0.6b", "gpu80"): (8192, 256, "kv_pages"),
    ("0.6b", "gpu24"): (2249, 256, "memory"),
    ("1.7b", "cpu16"): (104, 35, "memory"),
    ("1.7b", "cpu24"): (325, 112, "memory"),
    ("1.7b", "gpu80"): (8192, 256, "kv_pages"),
    ("1.7b", "gpu24"): (2008, 256, "memory"),
    ("dia", "cpu16"): None,
    ("dia", "cpu24"): (718, 256, "memory"),
    ("dia", "gpu80"): (15547, 256, "memory"),
    ("dia", "gpu24"): (3995, 256, "memory"),
}


def _case(model: str, device: str):
    recipe, needs_of, chunk = MODELS[model]
    kind, total_gb, dtype = DEVICES[device]
    needs, weights = needs_of(dtype)
    limits = plan_limits(load_recipe(recipe), needs, chunk)
    # the plan runs after the weights load: free = the device's memory less the weights
    budget = Budget(kind, total_gb * GB - weights, 0.90 if kind == "cuda" else 0.50)
    return needs, limits, budget


@pytest.mark.parametrize("model, device", sorted(PINNED))
def test_plan_is_pinned_for_the_real_dimensions(model, device):
    needs, limits, budget = _case(model, device)
    want = PINNED[(model, device)]
    if want is None:
        with pytest.raises(MemoryPlanError) as e:
            plan_memory(needs, limits, budget)
        msg = str(e.value)
        assert "one request" in msg and "GB" in msg and "positions" in msg and "\n" not in msg
        return
    plan = plan_memory(needs, limits, budget)
    assert (plan.pages, plan.slots, plan.limited_by) == want, plan.summary()
    assert plan.total_bytes <= budget.usable_bytes
    # at least one request at the context bound (every sequence of a CFG pair) fits in the pool
    assert plan.positions >= needs.rows_per_request * limits.row_positions
    line = plan.summary()
    for part in (f"{plan.pages:,} KV pages", f"{plan.positions:,} positions", f"{plan.slots:,} codec slots",
                 "GB usable"):
        assert part in line


def test_the_issue_case_no_longer_asks_for_an_h100_pool():
    """The 0.6B recipe's 8,192 x 64 positions in float32 is 120 GB; on a 24 GB host the plan gives what
    half the available RAM holds, workspaces and codec slots included."""
    needs, limits, budget = _case("0.6b", "cpu24")
    assert 8192 * 64 * needs.kv_bytes_per_position > 100 * GB
    plan = plan_memory(needs, limits, budget)
    assert plan.total_bytes <= 0.5 * 24 * GB


def test_caps_bind_when_smaller_than_memory():
    needs, limits, budget = _case("0.6b", "gpu80")
    small = dataclasses.replace(limits, kv_pages_cap=100)
    assert (plan_memory(needs, small, budget).pages, plan_memory(needs, small, budget).limited_by) == (
        100, "kv_pages")
    few_rows = dataclasses.replace(limits, max_running=2, kv_pages_cap=0)
    plan = plan_memory(needs, few_rows, budget)
    assert plan.limited_by == "max_running x context"
    assert plan.pages == 2 * -(-limits.row_positions // limits.page_size)
    slots = dataclasses.replace(limits, codec_slots_cap=3)
    assert plan_memory(needs, slots, budget).slots == 3


def test_more_memory_never_gives_a_smaller_plan():
    needs, limits, _ = _case("1.7b", "gpu24")
    pages = [plan_memory(needs, limits, Budget("cuda", gb * GB, 0.9)).pages for gb in (8, 12, 20, 40, 60)]
    assert pages == sorted(pages)


def test_refusal_names_the_numbers_before_allocating():
    needs, limits, _ = _case("0.6b", "cpu16")
    need = workspace_bytes(needs, limits)
    with pytest.raises(MemoryPlanError, match=r"needs \d+\.\d\d GB of workspaces.*only 0\.50 GB is usable"):
        plan_memory(needs, limits, Budget("cpu", 1 * GB, 0.5))
    assert need > 0
    assert issubclass(MemoryPlanError, ConfigError)  # the CLI prints it as one sentence, exit 2


def test_device_readings(tmp_path):
    f = tmp_path / "meminfo"
    f.write_text("MemTotal:       24000000 kB\nMemFree:         1000000 kB\nMemAvailable:   12000000 kB\n")
    assert mem_available(f) == 12000000 * 1024
    b = measure_budget("cpu", 0.0)
    assert b.device == "cpu" and b.fraction == 0.50 and b.free_bytes > 0
    assert measure_budget("cpu", 0.25).fraction == 0.25


def test_memory_fraction_is_validated():
    with pytest.raises(ConfigError, match="memory_fraction"):
        EngineConfig().with_overrides(["memory_fraction=1.5"])
    assert EngineConfig().with_overrides(["memory_fraction=0.3"]).memory_fraction == 0.3


def test_engine_sizes_its_pools_by_the_plan(tiny_custom_voice):
    from voxcli.models import load_model

    from voxcli.engine.engine import Engine

    program = load_model(str(tiny_custom_voice), "cpu", "float32")
    cfg = load_recipe("demo").replace(kv_pages=50, codec_slots=7)
    with Engine(program, cfg) as engine:
        plan = engine.memory_plan
        assert plan is not None and (plan.pages, plan.slots) == (50, 7)  # caps bind: a tiny model
        assert (engine.config.kv_pages, engine.config.codec_slots) == (50, 7)
        assert program.k_pool.shape[1] == 51  # the plan's pages plus the scratch page
    with pytest.raises(MemoryPlanError, match="one request"):
        Engine(program, cfg.replace(memory_fraction=1e-9))


def test_engine_takes_the_plans_sizes_when_memory_binds(tiny_custom_voice, monkeypatch):
    from voxcli.models import load_model

    from voxcli.engine import memory_plan
    from voxcli.engine.engine import Engine

    program = load_model(str(tiny_custom_voice), "cpu", "float32")
    cfg = load_recipe("demo")
    needs = program.memory_needs()
    limits = plan_limits(cfg, needs, 8)
    page = limits.page_size * memory_plan.position_bytes(needs)
    free = workspace_bytes(needs, limits) + 400 * page + (cfg.codec_slots + 1) * needs.codec_slot_bytes
    monkeypatch.setattr(memory_plan, "measure_budget", lambda device, fraction: Budget("cpu", free, 1.0))
    with Engine(program, cfg) as engine:
        plan = engine.memory_plan
        assert plan.limited_by == "memory" and 300 < plan.pages < cfg.kv_pages
        assert (engine.config.kv_pages, engine.config.codec_slots) == (plan.pages, plan.slots)
        assert engine.scheduler.kv.num_pages == plan.pages and program.k_pool.shape[1] == plan.pages + 1


def test_dtype_auto_picks_bfloat16_where_the_device_does_it_well(tmp_path):
    from voxcli.cli_options import engine_options
    from voxcli.config import cpu_has_fast_bf16, resolve_auto, resolve_dtype

    assert resolve_dtype("auto", "cuda:0", lambda: False) == "bfloat16"
    assert resolve_dtype("auto", "cpu", lambda: True) == "bfloat16"
    assert resolve_dtype("auto", "cpu", lambda: False) == "float32"
    assert resolve_dtype("float32", "cuda", lambda: True) == "float32"
    info = tmp_path / "cpuinfo"
    info.write_text("processor : 0\nflags : fpu sse avx512f avx512_bf16\n")
    assert cpu_has_fast_bf16(info)
    info.write_text("processor : 0\nflags : fpu sse avx2\n")
    assert not cpu_has_fast_bf16(info) and not cpu_has_fast_bf16(tmp_path / "missing")
    cfg = resolve_auto(EngineConfig(dtype="auto", executor="cpu"), cuda_available=lambda: False)
    assert cfg.dtype in ("float32", "bfloat16") and cfg.device == "cpu"
    def sets(given: list[str] | None, dtype: str) -> list[str]:  # --dtype is --set dtype=...
        return list(engine_options(None, None, given, None, None, None, dtype).sets)

    assert sets(["policy=sync"], "bfloat16") == ["policy=sync", "dtype=bfloat16"]
    with pytest.raises(ConfigError, match="dtype must be one of auto, float32"):
        EngineConfig().with_overrides(sets(None, "fp8"))


def test_weights_that_cannot_fit_are_refused_before_allocating(tiny_custom_voice, monkeypatch):
    import voxcli.models.checkpoint as checkpoint
    from voxcli.models import load_model
    from voxcli.models.base import CheckpointError

    monkeypatch.setattr(checkpoint, "device_free", lambda device: 1000)
    with pytest.raises(CheckpointError, match=r"need 0\.\d\d GB in float32 but only 0\.00 GB is available"):
        load_model(str(tiny_custom_voice), "cpu", "float32")


def test_pools_are_resident_only_where_written():
    from voxcli.models.device_memory import pool_zeros

    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        t = pool_zeros((4, 3), dtype, "cpu")
        assert t.dtype == dtype and t.shape == (4, 3) and not t.any()
        t[1, 2] = 5
        assert int(t.sum()) == 5
