"""The memory plan per role (a disaggregated placement, engine/roles.py): an LM-only engine sizes KV pages
only (everything the codec would have had goes to KV), a codec-only engine sizes codec slots only; pinned
for the real Qwen3-TTS 1.7B dimensions on a 24 GB GPU, and the role engines allocate only their own pool."""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch
from voxcli.models.base import SynthesisRequest
from voxcli.models.qwen3_tts import memory as qwen_memory
from voxcli.models.qwen3_tts.codec import CodecDecoderConfig
from voxcli.models.qwen3_tts.config import parse_config
from voxcli.models.qwen3_tts.sizes import real_config
from voxcli.models.qwen3_tts.talker import Qwen3TTSWeights
from voxcli.models.qwen3_tts.tiny_audio import speech_tokenizer_config

from voxcli.config import EngineConfig, load_recipe
from voxcli.engine.memory_plan import (
    Budget,
    MemoryPlanError,
    plan_limits,
    plan_memory,
    position_bytes,
    workspace_bytes,
)

GB = 10**9


@functools.cache
def _qwen17_gpu24():
    """Qwen3-TTS-1.7B in bfloat16 on a 24 GB GPU, after its weights (as test_memory_plan's gpu24 case)."""
    cfg = parse_config(real_config("1.7B"))
    codec = CodecDecoderConfig.from_dict(speech_tokenizer_config("real")["decoder_config"])
    with torch.device("meta"):
        weights = Qwen3TTSWeights(cfg.talker)
    needs = qwen_memory.memory_needs(cfg.talker, codec, torch.bfloat16, codec_loaded=False)
    weight_bytes = sum(p.numel() for p in weights.parameters()) * 2
    limits = plan_limits(load_recipe("qwen3-tts-1.7b"), needs, 10)
    return needs, limits, Budget("cuda", 24 * GB - weight_bytes, 0.90)


def test_lm_role_gives_the_codec_memory_to_kv():
    needs, limits, budget = _qwen17_gpu24()
    both, lm = plan_memory(needs, limits, budget), plan_memory(needs, limits, budget, "lm")
    assert (both.pages, both.slots, both.limited_by) == (2008, 256, "memory")
    assert (lm.pages, lm.slots, lm.slot_bytes, lm.limited_by, lm.role) == (2177, 0, 0, "memory", "lm")
    page = limits.page_size * position_bytes(needs)
    # the LM's workspace lacks the codec batch and the codec weights still to load
    codec_work = needs.pending_weight_bytes + limits.codec_frames * needs.codec_bytes_per_frame
    assert workspace_bytes(needs, limits, "lm") == workspace_bytes(needs, limits) - codec_work
    assert lm.pages == (budget.usable_bytes - workspace_bytes(needs, limits, "lm")) // page - 1
    # what moved to KV: the slot table (scratch slot included) and the codec's workspace
    assert (lm.pages - both.pages) == pytest.approx((both.slot_bytes + codec_work) / page, abs=1)
    assert lm.total_bytes <= budget.usable_bytes
    line = lm.summary()
    assert "role lm" in line and "2,177 KV pages" in line and "no codec slots" in line


def test_codec_role_sizes_slots_only():
    needs, limits, budget = _qwen17_gpu24()
    codec = plan_memory(needs, limits, budget, "codec")
    assert (codec.pages, codec.kv_bytes, codec.slots, codec.limited_by) == (0, 0, 256, "codec_slots")
    assert codec.slot_bytes == 257 * needs.codec_slot_bytes  # the scratch slot too
    assert codec.workspace_bytes == workspace_bytes(needs, limits, "codec") == (
        needs.pending_weight_bytes + limits.codec_frames * needs.codec_bytes_per_frame)
    assert "role codec" in codec.summary() and "no KV pool" in codec.summary()
    # no 10% share guard: the slots take all that is left, up to the config's count
    many = plan_memory(needs, dataclasses.replace(limits, codec_slots_cap=100_000), budget, "codec")
    fit = (budget.usable_bytes - codec.workspace_bytes) // needs.codec_slot_bytes - 1
    assert (many.slots, many.limited_by) == (fit, "memory") and fit > 5000
    # a budget of the workspaces plus 11 slots: 10 to hand out and the scratch one
    tight = Budget("cuda", codec.workspace_bytes + 11 * needs.codec_slot_bytes, 1.0)
    assert plan_memory(needs, limits, tight, "codec").slots == 10
    with pytest.raises(MemoryPlanError, match="codec-only engine needs"):
        plan_memory(needs, limits, Budget("cuda", codec.workspace_bytes + needs.codec_slot_bytes, 1.0),
                    "codec")


def test_role_engines_allocate_only_their_pool(tiny_custom_voice, monkeypatch):
    from voxcli.models import load_model

    from voxcli.engine.roles import CodecEngine, LMEngine

    cfg = EngineConfig(executor="cpu", policy="full", kv_pages=40, kv_page_size=16, codec_slots=5,
                       max_running=4, threads=1)
    lm_p, codec_p = load_model(str(tiny_custom_voice)), load_model(str(tiny_custom_voice))

    def refuse(*_a, **_k):
        raise AssertionError("allocated the other role's pool")

    monkeypatch.setattr(lm_p, "init_codec_slots", refuse)
    monkeypatch.setattr(codec_p, "init_kv", refuse)
    with LMEngine(lm_p, cfg) as lm, CodecEngine(codec_p, cfg) as codec:
        assert lm.memory_plan.role == "lm" and (lm.memory_plan.slots, lm.memory_plan.slot_bytes) == (0, 0)
        assert lm_p.k_pool.shape[1] == 41
        assert codec.memory_plan.role == "codec" and codec.memory_plan.kv_bytes == 0
        assert codec_p.k_pool is None and codec.config.codec_slots == 5


def test_lm_role_admits_without_codec_slots():
    """An LM-only engine holds no codec slot: codec_slots=1 does not cap its running requests."""
    from support.roles_harness import sim_role_engine, wait_until

    lm = sim_role_engine("lm", codec_slots=1)
    try:
        reqs = [SynthesisRequest(text=f"r{i}", fixed_frames=3000) for i in range(3)]
        streams = [lm.submit(r, key=f"k{i}") for i, r in enumerate(reqs)]
        wait_until(lambda: len(lm.scheduler.decoding) == 3)
        assert lm.scheduler.slots.used == 0
        assert all(r.slot == -1 for r in lm.scheduler.decoding.values())
        for s in streams:
            s.cancel()
        wait_until(lambda: lm.scheduler.kv.used == 0)
    finally:
        lm.close()


def test_codec_role_budgets_growing_codec_state_by_bytes():
    """A codec whose per-request state grows (CosyVoice 3's DiT keys/values): a codec-only engine's plan
    gives that state the bytes its slots leave, at least one request's at the frame cap, as the one-engine
    plan budgets it; `codec_state_gb` caps it; without growing state the plan is unchanged."""
    from voxcli.models.base import MemoryNeeds

    from voxcli.engine.memory_plan import PlanLimits, request_state_bytes

    needs = MemoryNeeds(kv_bytes_per_position=100_000, codec_slot_bytes=10 * 10**6,
                        codec_bytes_per_frame=10**6, codec_state_bytes_per_frame=3_600_000,
                        codec_state_prefix_frames=50)
    limits = PlanLimits(page_size=16, kv_pages_cap=0, codec_slots_cap=64, max_running=8, row_positions=2000,
                        prefill_tokens=500, decode_rows=8, codec_frames=64, frames=1500)
    budget = Budget("cuda", 20 * GB, 0.9)
    plan = plan_memory(needs, limits, budget, "codec")
    work = workspace_bytes(needs, limits, "codec")
    one = request_state_bytes(needs, limits.frames)
    assert (plan.slots, plan.limited_by) == (64, "codec_slots")
    assert plan.state_bytes == budget.usable_bytes - work - 65 * needs.codec_slot_bytes >= one
    assert plan.total_bytes == budget.usable_bytes and "codec state" in plan.summary()
    # little memory: the slots leave one request's state at the cap (two slots still fit beside it)
    small = Budget("cuda", work + one + 20 * needs.codec_slot_bytes, 1.0)
    tight = plan_memory(needs, limits, small, "codec")
    assert (tight.slots, tight.limited_by) == (19, "memory") and tight.state_bytes == one
    # the config's cap on the state
    capped = plan_memory(needs, dataclasses.replace(limits, state_cap_bytes=2 * GB), budget, "codec")
    assert capped.state_bytes == 2 * GB and capped.slots == 64
    # no growing state: no state budget, the slots take what is left (up to the config's count)
    flat = plan_memory(dataclasses.replace(needs, codec_state_bytes_per_frame=0), limits, small, "codec")
    assert (flat.state_bytes, flat.slots, flat.limited_by) == (0, 64, "codec_slots")


def test_codec_engine_reserves_each_requests_state_with_its_slot():
    """The LM engine's worst-case state figure travels with the chunks (`CodeChunk.state_bytes`); the codec
    engine reserves it with the slot: a request whose state does not fit beside the others' waits (FIFO),
    one that could never fit is refused with the numbers."""
    import time

    import numpy as np
    from support.roles_harness import sim_role_engine, wait_until

    from voxcli.config import ChunkSchedule
    from voxcli.engine.roles import CodeChunk
    from voxcli.engine.stream import RequestRejected

    codec = sim_role_engine("codec", codec_slots=4, codec_state_gb=1.0)
    try:
        books = codec.spec.codebooks

        def chunk(key, index, last, state):
            codes = np.zeros((3, books), np.int64)
            codes[:, 0] = np.arange(3 * index, 3 * index + 3)  # the sim checks each chunk's first frame
            return CodeChunk(key=key, index=index, start=3 * index, codes=codes,
                             last=last, deadline_epoch=0.0, arrival_epoch=time.time(), ttfa_target_s=0.2,
                             schedule=ChunkSchedule(first=3, steady=3), sent_epoch=time.time(),
                             state_bytes=state)

        a = codec.feed(chunk("a", 0, False, 600 * 10**6))
        b = codec.feed(chunk("b", 0, True, 600 * 10**6))
        huge = codec.feed(chunk("huge", 0, True, 2 * GB))
        with pytest.raises(RequestRejected, match="codec state needs 2.00 GB but this codec engine's memory "
                                                  "plan holds 1.00 GB"):
            huge.wait(10)
        wait_until(lambda: codec.scheduler.slots.used == 1)
        sched = codec.scheduler
        assert sched.slots.state_used == 600 * 10**6 and [r.timeline.name for r in sched.waiting] == ["b"]
        codec.feed(chunk("a", 1, True, 600 * 10**6))  # a ends: b takes its slot and its state's room
        assert a.wait(10).shape[0] == 6 * 1920 and b.wait(10).shape[0] == 3 * 1920
        wait_until(lambda: sched.slots.used == 0 and sched.slots.state_used == 0)
    finally:
        codec.close()
