"""Byte-based admission of CosyVoice 3's per-request DiT caches: the arithmetic at real dimensions (nothing
allocated), the memory plan's codec state budget, and the scheduler queueing a request whose state does not
fit beside the others and refusing one that could never fit."""

from __future__ import annotations

import pytest
import torch
from voxcli.models.base import SynthesisRequest
from voxcli.models.codecs.hift.config import HiFTConfig
from voxcli.models.cosyvoice3 import memory as cosy_memory
from voxcli.models.cosyvoice3.config import CosyVoice3Config, DiTConfig, FlowConfig
from voxcli.models.flowlm.config import LMConfig, Qwen2Config

from voxcli.config import ChunkSchedule, EngineConfig, load_recipe
from voxcli.engine.engine import Engine
from voxcli.engine.memory_plan import Budget, MemoryPlanError, plan_limits, plan_memory
from voxcli.engine.stream import RequestRejected
from voxcli.sim.synthetic import SyntheticProgram

GB = 10**9
REAL = CosyVoice3Config(lm=LMConfig(Qwen2Config()), flow=FlowConfig(DiTConfig()), hift=HiFTConfig())
PROMPT_MEL = 300  # a 6 s voice prompt (50 mel frames per second)


def test_dit_cache_arithmetic_at_real_size():
    # 10 Euler steps x 2 CFG rows x 22 layers x (K, V) x 16 heads x 64 x 4 B
    assert cosy_memory.dit_cache_bytes_per_mel_frame(REAL, torch.float32) == 10 * 2 * 22 * 2 * 1024 * 4
    assert cosy_memory.dit_cache_bytes_per_mel_frame(REAL, torch.bfloat16) == 10 * 2 * 22 * 2 * 1024 * 2
    # per speech token: two mel frames, each with the vocoder's 80 mel + f0 values and 9 phase increments
    assert cosy_memory.state_bytes_per_token(REAL, torch.float32) == 2 * (3_604_480 + 81 * 4 + 9 * 4)
    needs = cosy_memory.memory_needs(REAL, torch.float32, PROMPT_MEL)
    assert needs.kv_bytes_per_position == 2 * 24 * 2 * 64 * 4
    assert needs.codec_state_prefix_frames == 150
    # a 60 s request (1500 tokens) holds 11.9 GB of DiT caches in fp32; a token's caches are ~290x its KV
    state = needs.codec_state_bytes_per_frame * (1500 + 150)
    assert state == pytest.approx(11.9 * GB, rel=0.01)
    assert 290 < needs.codec_state_bytes_per_frame / needs.kv_bytes_per_position < 300


def _limits(needs, **changes):
    cfg = load_recipe("cosyvoice3-0.5b").replace(**changes)  # max_frames 1500, 64 rows, 8192 pages of 64
    return plan_limits(cfg, needs, 100)


def test_the_plan_budgets_the_codec_state_of_whole_requests():
    needs = cosy_memory.memory_needs(REAL, torch.bfloat16, PROMPT_MEL)
    plan = plan_memory(needs, _limits(needs), Budget("cuda", 78 * GB, 0.90))
    one = needs.codec_state_bytes_per_frame * (1500 + 150)  # 5.95 GB in bf16
    # the KV pool's need is tiny next to the caches: nearly all that is left goes to the codec state,
    # which holds 11 requests at the 60 s cap (or many more shorter ones: each reserves its own cap)
    assert plan.state_bytes // one == 11
    assert plan.total_bytes <= plan.budget.usable_bytes
    assert "codec state" in plan.summary()
    # a cap of its own (codec_state_gb) wins
    capped = plan_memory(needs, _limits(needs, codec_state_gb=20.0), Budget("cuda", 78 * GB, 0.90))
    assert capped.state_bytes == 20 * GB


def test_a_budget_below_one_long_request_refuses_long_ones_only():
    from voxcli.engine.codec_slots import CodecSlotTable

    needs = cosy_memory.memory_needs(REAL, torch.float32, PROMPT_MEL)  # 11.9 GB for one 60 s request
    plan = plan_memory(needs, _limits(needs), Budget("cpu", 16 * GB, 0.50))
    one = needs.codec_state_bytes_per_frame * (1500 + 150)
    assert 6.5 * GB < plan.state_bytes < one  # 6.7 GB: KV keeps one request's pages, state the rest
    assert plan.pages * plan.page_size >= 4096 + 1500 + 1  # one request at the context bound
    table = CodecSlotTable(4, plan.state_bytes)
    short = needs.codec_state_bytes_per_frame * (250 + 150)  # a 10 s reply: 2.9 GB
    assert table.never_fits(one) and not table.never_fits(short)
    assert table.acquire(1, short) is not None and table.acquire(2, short) is not None
    assert table.acquire(3, short) is None  # a third waits for one of them
    with pytest.raises(MemoryPlanError, match="one request's KV"):  # the KV rule still holds
        plan_memory(needs, _limits(needs), Budget("cpu", 0.2 * GB, 0.50))


class _GrowingState(SyntheticProgram):
    """The sim's program with CosyVoice-like codec state: 0.1 GB for the voice + 1 MB per frame."""

    def prepare(self, request):
        p = super().prepare(request)
        p.codec_state_base_bytes, p.codec_state_bytes_per_frame = 10**8, 10**6
        return p


def test_requests_wait_for_codec_state_and_one_that_never_fits_is_refused():
    chunk = ChunkSchedule(first=4, steady=10)
    cfg = EngineConfig(executor="sim", chunk=chunk, codec_state_gb=1.0, codec_slots=8)
    eng = Engine(_GrowingState(chunk=chunk), cfg)
    # each reserves 0.1 + 500 x 1 MB = 0.6 GB at its cap: the second must wait for the first's release
    a = eng.submit(SynthesisRequest(text="first", fixed_frames=40, max_frames=500), at=0.0)
    b = eng.submit(SynthesisRequest(text="second", fixed_frames=40, max_frames=500), at=0.0)
    c = eng.submit(SynthesisRequest(text="too long", fixed_frames=40, max_frames=1000), at=0.0)
    eng.run()
    assert a.status == "done" and b.status == "done" and c.status == "rejected"
    assert b.timeline.admitted >= a.timeline.finished
    with pytest.raises(RequestRejected, match="codec state needs 1.10 GB at its cap of 1000 frames"):
        c.wait()
    sched = eng.scheduler
    assert sched.slots.state_used == 0 and sched.slots.free == 8


def test_the_tiny_program_reports_its_state(tmp_path):
    from voxcli.models.cosyvoice3.program import CosyVoice3Program
    from voxcli.models.cosyvoice3.tiny import build_tiny

    build_tiny(tmp_path, size="tiny")
    prog = CosyVoice3Program.load(str(tmp_path))
    needs = prog.memory_needs()
    p = prog.prepare(SynthesisRequest(text="Hello there."))
    per_token = cosy_memory.state_bytes_per_token(prog.cfg, torch.float32)
    assert needs.codec_state_bytes_per_frame == p.codec_state_bytes_per_frame == per_token
    voice = next(iter(prog.speakers.values())).voice
    assert p.codec_state_base_bytes == voice.prompt_feat.shape[0] * per_token // 2
