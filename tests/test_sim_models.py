"""The sim's fidelity models: each effect of "honest" on its own, and "optimistic" = none of them."""

from __future__ import annotations

import math

import pytest
from voxcli.models.base import SynthesisRequest
from voxcli.models.qwen3_tts.sim import build_profile

from voxcli.config import ChunkSchedule, ConfigError, EngineConfig
from voxcli.engine.engine import Engine
from voxcli.engine.executors.base import Work
from voxcli.engine.lanes import lane_layout
from voxcli.sim.cost import CostProfile, SimModel
from voxcli.sim.executor import SimExecutor
from voxcli.sim.synthetic import SyntheticProgram

H100 = build_profile("h100", 0.0835, "v2")


def profile(**honest) -> CostProfile:
    data = {**H100, "sim": {**H100["sim"], "honest": {**H100["sim"]["honest"], **honest}}}
    return CostProfile.from_dict(data)


def executor(prof: CostProfile, model: str, seed: int = 0) -> SimExecutor:
    layout = lane_layout(EngineConfig(executor="sim", policy="full", lm_sms=100, codec_sms=32))
    return SimExecutor(SyntheticProgram(), prof, layout, model=prof.sim_model(model), seed=seed)


def decode(bucket: int = 64) -> Work:
    return Work(lane="lm", stage="decode", rows=[], bucket=bucket)


def codec(lane: str, bucket: int) -> Work:
    return Work(lane=lane, stage="codec", rows=[], bucket=bucket, frames=10 * bucket)  # type: ignore[arg-type]


def run_alone(ex: SimExecutor, work: Work) -> float:
    t0 = ex.now()
    ex.launch(work)
    (c,) = ex.wait(None)
    return c.finished - t0


def test_the_shipped_profiles_default_to_honest_and_keep_optimistic_one_flag_away():
    prof = CostProfile.from_toml("recipes/gpus/h100.toml")
    opt = prof.sim_model("optimistic")
    assert prof.sim_model().name == "honest"
    flags = (opt.urgent_contention, opt.bandwidth_sharing, opt.host, opt.noise_sigma)
    assert flags == (False, False, "free", 0)
    assert SimModel().host == "free"
    honest = prof.sim_model("honest")
    assert honest.urgent_contention and honest.bandwidth_sharing and honest.noise_sigma == 0.1
    assert honest.host == "profile" and honest.host_call_us > 0
    with pytest.raises(ValueError, match="sim_model 'nope'.*honest, optimistic"):
        prof.sim_model("nope")


def test_optimistic_is_the_table_and_leaves_the_urgent_lane_alone():
    prof = profile()
    ex = executor(prof, "optimistic")
    assert run_alone(ex, decode()) == pytest.approx(prof.latency("decode", 64, 100))
    # urgent beside lm: the urgent batch keeps its whole-device time
    ex.launch(decode())
    ex.launch(codec("urgent", 4))
    (c,) = ex.wait(None)
    assert c.work.lane == "urgent" and c.finished - c.started == pytest.approx(prof.latency("codec", 4, None))


def test_honest_urgent_lane_contends_with_what_it_overlaps():
    prof = profile(bandwidth_sharing=False, noise_sigma=0.0, host="free")
    ex = executor(prof, "honest")
    ex.launch(decode())
    ex.launch(codec("urgent", 4))
    (c,) = ex.wait(None)
    assert c.finished - c.started == pytest.approx(prof.latency("codec", 4, None) * prof.interference)


def test_honest_bandwidth_sharing_slows_both_by_their_memory_fractions():
    prof = profile(urgent_contention=False, noise_sigma=0.0, host="free")
    m = prof.sim_model("honest")
    ex = executor(prof, "honest")
    t_lm, t_bg = prof.latency("decode", 256, 100), prof.latency("codec", 32, 32, frames=320)
    f_lm = prof.bytes_moved("decode", 256) / (m.bandwidth_gbs * 1e9) / t_lm
    f_bg = prof.bytes_moved("codec", 32, 320) / (m.bandwidth_gbs * 1e9) / t_bg
    assert 0 < f_bg < f_lm < 1
    ex.launch(decode(256))
    ex.launch(codec("background", 32))
    done = {c.work.lane: c for c in ex.wait(None)}
    # the partitions share no SMs, so only bandwidth slows them: the shorter one ends first
    first = min(t_lm, t_bg)
    lane = "lm" if t_lm < t_bg else "background"
    f_self, f_other = (f_lm, f_bg) if lane == "lm" else (f_bg, f_lm)
    assert done[lane].finished == pytest.approx(first * (1 + f_self * f_other))


def test_honest_noise_is_seeded_lognormal_with_mean_one():
    prof = profile(urgent_contention=False, bandwidth_sharing=False, host="free")
    base = prof.latency("decode", 64, 100)
    ex = executor(prof, "honest", seed=1)
    ratios = [run_alone(ex, decode()) / base for _ in range(2000)]
    assert abs(sum(ratios) / len(ratios) - 1) < 0.01
    logs = [math.log(r) for r in ratios]
    mean = sum(logs) / len(logs)
    assert math.sqrt(sum((x - mean) ** 2 for x in logs) / len(logs)) == pytest.approx(0.1, rel=0.08)
    again = [run_alone(ex, decode()) for ex in [executor(prof, "honest", seed=1)] for _ in range(5)]
    assert again == pytest.approx([r * base for r in ratios[:5]])
    other = executor(prof, "honest", seed=2)
    assert run_alone(other, decode()) != pytest.approx(again[0])


def test_honest_host_time_moves_the_clock_and_delays_what_finished_meanwhile():
    prof = profile(urgent_contention=False, bandwidth_sharing=False, noise_sigma=0.0, host_call_us=5000.0,
                   host_row_us=10.0)
    ex = executor(prof, "honest")
    ex.launch(codec("background", 1))
    t_codec = prof.latency("codec", 1, 32, frames=10)
    assert t_codec < 0.006
    assert ex.charge_host(123.0, rows=100) == pytest.approx(0.006)  # the profile's value, not the measure
    assert ex.now() == pytest.approx(0.006) and ex.busy("background")  # done, but not seen yet
    (c,) = ex.wait(None)
    assert c.finished == pytest.approx(0.006) and not ex.busy("background")
    assert executor(prof, "optimistic").charge_host(1.0, 100) == 0.0


def test_engine_on_optimistic_matches_a_profile_without_sim_models():
    cfg = EngineConfig(executor="sim", policy="full", gpu="h100", sim_model="optimistic",
                       chunk=ChunkSchedule(first=10, steady=10))
    plain = {k: v for k, v in H100.items() if k != "sim"}

    def timelines(prof: CostProfile, config: EngineConfig):
        eng = Engine(SyntheticProgram(chunk=config.chunk), config, profile=prof)
        for i in range(60):
            eng.submit(SynthesisRequest(text="x", fixed_frames=20 + 7 * i), at=0.02 * i)
        eng.run()
        return [(t.status, t.first_audio, [c.t_delivered for c in t.chunks]) for t in eng.timelines]

    optimistic = timelines(CostProfile.from_dict(H100), cfg)
    assert optimistic == timelines(CostProfile.from_dict(plain), cfg.replace(sim_model=""))
    assert optimistic != timelines(CostProfile.from_dict(H100), cfg.replace(sim_model="honest"))


def test_an_unknown_sim_model_is_a_config_error_naming_the_choices():
    cfg = EngineConfig(executor="sim", gpu="h100", sim_model="pessimistic")
    with pytest.raises(ConfigError, match="sim_model 'pessimistic'.*honest, optimistic"):
        Engine(SyntheticProgram(), cfg)
    with pytest.raises(ValueError, match=r"\[sim.x\] host must be one of"):
        CostProfile.from_dict({**H100, "sim": {"x": {"host": "cheap"}}})
