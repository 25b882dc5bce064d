"""`vox profile`'s load shape charges the codec for the frames its chunks really hold (the model's chunk
schedule), so the throughput model's codec estimate agrees with the capacity bound's and a codec-bound
model (CosyVoice 3: 28 / 50 / 100-frame chunks) is not mistaken for a backbone-bound one."""

from __future__ import annotations

import pytest
from voxcli.models.base import ChunkSchedule
from voxcli.models.registry import sim_spec_for

from voxcli.bench.workloads import estimate_frames, load_workload
from voxcli.config import recipe_path
from voxcli.sim.bound import capacity_bound
from voxcli.sim.cost import CostProfile
from voxcli.sim.splits import LoadShape, choose_split, codec_capacity_rps, load_shape, split_points

COSY = ChunkSchedule(first=28, ramp=(50,), steady=100)


def test_load_shape_arithmetic():
    # 195 frames: 28 + 50 + 100 + 17 -> 4 chunks, background 167 frames in 3; 20 frames: one chunk
    shape = load_shape([195, 20], COSY)
    assert shape.chunks_per_request == 2.5
    assert shape.frames_per_request == 107.5
    assert shape.first_chunk_frames == 28
    assert shape.frames_per_chunk == round(167 / 3)
    # Qwen3-TTS's 10/10 schedule keeps the old shape: 98 frames = 10 chunks, 88 background frames in 9
    qwen = load_shape([98], ChunkSchedule(first=10, steady=10))
    assert (qwen.chunks_per_request, qwen.frames_per_chunk, qwen.first_chunk_frames) == (10, 10, 10)
    with pytest.raises(ValueError):
        load_shape([], COSY)


def _shape(model: str) -> LoadShape:
    sim = sim_spec_for(model)
    return load_shape([estimate_frames(u.text, sim.frame_rate) for u in load_workload("libritts")], sim.chunk)


@pytest.mark.parametrize("codec_sms", [16, 48, 88, 112])
def test_throughput_model_and_bound_agree_on_the_codec_partition(codec_sms):
    prof = CostProfile.from_toml(recipe_path("gpus/h100-cosyvoice3-0.5b"))
    shape = _shape("cosyvoice3-0.5b")
    bound = capacity_bound(prof, lm_sms=132 - codec_sms, codec_sms=codec_sms,
                           frames_per_request=shape.frames_per_request, prompt_tokens=34,
                           urgent_frames=shape.first_chunk_frames)
    ours = codec_capacity_rps(prof, codec_sms, shape)
    assert ours == pytest.approx(bound.codec_rps, rel=0.05)
    # the old fixed 10 frames per chunk overstated it several times over (the 112/16 choice)
    old = LoadShape(frames_per_request=shape.frames_per_request, chunks_per_request=shape.chunks_per_request)
    assert codec_capacity_rps(prof, codec_sms, old) > 4 * bound.codec_rps


def test_cosyvoice3_gets_a_codec_heavy_split():
    prof = CostProfile.from_toml(recipe_path("gpus/h100-cosyvoice3-0.5b"))
    shape = _shape("cosyvoice3-0.5b")
    for rate in (30.0, 0.0):
        points = split_points(prof, rate or max(p.sustainable_rps for p in split_points(prof, 30, shape)),
                              shape)
        chosen = choose_split(points)
        assert chosen.codec_sms > chosen.lm_sms, (rate, chosen.name)
        assert chosen.codec_capacity_rps >= 30.0


def test_qwen3_split_is_unchanged():
    # 10-frame chunks: the shape equals the old default one (LoadShape's 10/10), so on the same profile the
    # throughput model chooses what it chose before the load shape followed the chunk schedule
    prof = CostProfile.from_toml(recipe_path("gpus/h100"))
    shape = _shape("qwen3-tts-1.7b")
    assert (shape.frames_per_chunk, shape.first_chunk_frames) == (10, 10)
    from voxcli.sim.splits import max_sustainable_rate

    old = LoadShape(frames_per_request=shape.frames_per_request, chunks_per_request=shape.chunks_per_request)
    chosen = choose_split(split_points(prof, max_sustainable_rate(prof, shape), shape))
    before = choose_split(split_points(prof, max_sustainable_rate(prof, old), old))
    assert chosen.name == before.name


def test_dia_no_longer_gets_a_codec_that_cannot_keep_up():
    # Dia's 45-frame background chunks: the old 10-frame shape rated the codec on 8 SMs at ~54 req/s and
    # chose 120/8 for a 17 req/s target; the bound says 8 SMs decode ~12 req/s of its frames
    from voxcli.sim.splits import max_sustainable_rate

    prof = CostProfile.from_toml(recipe_path("gpus/h100-dia-1.6b"))
    shape = _shape("dia-1.6b")
    rate = max_sustainable_rate(prof, shape)
    chosen = choose_split(split_points(prof, rate, shape))
    assert chosen.keeps_up and chosen.codec_capacity_rps >= rate
    bound8 = capacity_bound(prof, lm_sms=120, codec_sms=8, frames_per_request=shape.frames_per_request,
                            prompt_tokens=0, urgent_frames=shape.first_chunk_frames)
    assert bound8.codec_rps < rate
    assert chosen.name == "112/16"
