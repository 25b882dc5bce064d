"""Dia-1.6B in the simulator: the cost profile (no fitted parameter) and `vox bench --executor sim
--gpu h100 --model dia-1.6b`, whose stand-in requests are CFG pairs with a 15-step delay fill."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner
from voxcli.models.dia.sim import COST

from voxcli.config import ConfigError, EngineConfig
from voxcli.engine.estimates import load_profile
from voxcli.sim.cost import CostProfile


def test_profile_arithmetic_and_settings():
    # 18 layers x (self 10.5 M + cross q/o 8.4 M + MLP 50.3 M) + logits 18.9 M
    assert abs(COST.quantities()["step_params"] / 1e6 - 1264.7) < 0.1
    pess, opt = COST.terms("h100", "pessimistic"), COST.terms("h100", "optimistic")
    assert pess["floor_ms"] == opt["floor_ms"] and pess["row_ms"] > 6 * opt["row_ms"]
    assert pess["codec_frame_ms"] > opt["codec_frame_ms"]
    prof = CostProfile.from_dict(COST.build_profile("h100"))
    assert prof.latency("decode", 64) > prof.latency("decode", 1)
    assert prof.latency("codec", 1, 32) > prof.latency("codec", 1)  # fewer SMs, slower
    with pytest.raises(ValueError):
        COST.terms("h100", "fitted")


def test_shipped_profiles_are_the_script_output():
    from voxcli.config import recipe_path

    for setting, name in (("pessimistic", "h100-dia-1.6b"), ("optimistic", "h100-optimistic-dia-1.6b")):
        assert recipe_path(f"gpus/{name}").read_text() == COST.profile_toml("h100", setting)


def test_dia_gets_its_own_profile_never_qwens():
    cfg = EngineConfig(model="nari-labs/Dia-1.6B-0626", gpu="h100")
    assert load_profile(cfg).name == "h100-dia-1.6b"
    assert load_profile(cfg.replace(gpu="h100-optimistic")).name == "h100-optimistic-dia-1.6b"
    with pytest.raises(ConfigError, match="b200-dia-1.6b"):
        load_profile(cfg.replace(gpu="b200"))  # no Dia profile for B200: an error, not Qwen's numbers


def test_stand_in_is_a_cfg_pair_with_a_delay_fill():
    from voxcli.models.base import Row, SynthesisRequest

    from voxcli.sim.synthetic import SyntheticProgram

    p = SyntheticProgram.for_model("dia-1.6b")
    assert p.spec.sample_rate == 44100 and p.spec.samples_per_frame == 512
    prompt = p.prepare(SynthesisRequest(text="hello there", fixed_frames=3))
    assert prompt.width == 2
    row = Row(0, prompt, [0])
    outs = p.prefill([row]) + [p.decode([row])[0] for _ in range(18)]
    first = next(i for i, o in enumerate(outs) if o.frame is not None)
    assert first == 16 and outs[18].done  # prefill + 15 fill steps, then 3 frames


def test_vox_bench_sim_dia_runs(tmp_path, monkeypatch):
    from voxcli import cli

    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli.app, ["bench", "--executor", "sim", "--gpu", "h100", "--model", "dia-1.6b",
                                     "--policy", "full", "--rates", "2,4", "--duration", "4"])
    assert r.exit_code == 0, r.output
    assert "capacity" in r.output


def _decode_ms(profile: CostProfile, prompts) -> float:
    from voxcli.models.base import Row

    from voxcli.engine.executors.base import Work
    from voxcli.engine.lanes import LaneLayout
    from voxcli.sim.executor import SimExecutor
    from voxcli.sim.synthetic import SyntheticProgram

    rows = [Row(i, p, [0]) for i, p in enumerate(prompts)]
    layout = LaneLayout(policy="sync", lanes=("lm",), sms={"lm": None}, serialized=True)
    sim = SimExecutor(SyntheticProgram.for_model("dia-1.6b"), profile, layout)
    work = Work(lane="lm", stage="decode", rows=rows, bucket=sum(p.width for p in prompts))
    return sim.duration(work) * 1e3


def test_cfg_pairs_are_charged_their_shared_work_by_text_length():
    from dataclasses import replace

    from voxcli.models.base import Prompt

    # a hand-made linear table: 1 ms floor + 0.5 ms per row
    prof = CostProfile.from_dict({"gpu": {"sms": 132}, "stages": {"decode": {
        "batch": [1, 64], "ms": [1.5, 1.0 + 0.5 * 64], "cfg_row": 0.6, "cfg_group": 0.4}}})

    def pair(key):
        return Prompt(length=1, data=None, max_frames=8, width=2, uncond_key=key)

    single = Prompt(length=1, data=None, max_frames=8)
    # 3 pairs of one text length + 1 of another + 1 without a key + 1 single row: 11 rows before sharing
    batch = [pair(7), pair(7), pair(7), pair(9), pair(None), single]
    rows = 11 - 4 * (1 - 0.6) + 2 * 0.4
    assert abs(_decode_ms(prof, batch) - (1.0 + 0.5 * rows)) < 1e-9
    plain = replace(prof, stages={"decode": replace(prof.stages["decode"], cfg_row=1.0, cfg_group=0.0)})
    assert abs(_decode_ms(plain, batch) - (1.0 + 0.5 * 11)) < 1e-9  # a profile without sharing: 2 rows a pair
    assert CostProfile.from_dict(prof.to_dict()).stages["decode"].cfg_row == 0.6  # round trip


def test_unconditional_row_loses_its_whole_cross_attention_and_layer_0():
    from voxcli.models.sim_priors import BW_EFF, FLOP_EFF, GPUS, LAUNCH_US

    opt, pess = COST.terms("h100", "optimistic"), COST.terms("h100", "pessimistic")
    d, q = COST.sizes()["decoder"], COST.quantities()
    gpu = GPUS["h100"]
    # cross K/V is ~73% of a row's KV bytes: all of it goes, with the cross q/o GEMMs' FLOPs
    assert 0.7 < q["bytes_cross"] / q["row_bytes"] < 0.76
    qo_flops = 2 * d["layers"] * 2 * d["hidden"] * d["cross_heads"] * d["cross_head_dim"]
    cross_ms = (q["bytes_cross"] / (gpu.bandwidth * BW_EFF) + qo_flops / (gpu.flops * FLOP_EFF)) * 1e3
    assert opt["cfg_cross_ms"] == pytest.approx(cross_ms)
    # the same seconds leave both settings' rows (cross + layer 0); the pessimistic x 6.2 stays whole
    for t in (opt, pess):
        assert (1 - t["cfg_row"]) * t["row_ms"] == pytest.approx(cross_ms + opt["cfg_layer0_ms"])
    assert 0 < opt["cfg_layer0_ms"] < 0.05 * opt["row_ms"]
    assert 0.45 < opt["cfg_row"] < 0.55 and 0.9 < pess["cfg_row"] < 0.95
    # once per batch: nothing in the optimistic setting, one kernel per layer + one in the pessimistic
    assert opt["cfg_group"] == 0
    assert pess["cfg_group"] * pess["row_ms"] == pytest.approx((d["layers"] + 1) * LAUNCH_US / 1e3)
    # the stand-in's CFG prompts all carry one sharing key, whatever the text
    from voxcli.models.base import SynthesisRequest

    from voxcli.sim.synthetic import SyntheticProgram

    p = SyntheticProgram.for_model("dia-1.6b")
    a, b = (p.prepare(SynthesisRequest(text=t)) for t in ("hello there", "hello where"))
    assert a.uncond_key == b.uncond_key is not None
    assert p.prepare(SynthesisRequest(text="a much longer text than those")).uncond_key == a.uncond_key
    assert p.prepare(SynthesisRequest(text="hello", cfg_scale=1.0)).uncond_key is None
