"""The parametric cost model alone (models/sim_cost.py): a made-up declaration whose terms are computed here
by hand, and every registered family declaring its simulator cost through it."""

from __future__ import annotations

import importlib
import inspect
from dataclasses import replace

import pytest
from voxcli.models.registry import FAMILY_PACKAGES
from voxcli.models.sim_cost import CostShape, fill
from voxcli.models.sim_priors import BW_EFF, FLOP_EFF, GPUS, LAUNCH_US, ROW_INEFFICIENCY
from voxcli.models.sim_shapes import Codec, KvRead, Prefill, Stack

SIZES = {
    "lm": dict(hidden=4, layers=2, heads=2, kv_heads=1, head_dim=2, mlp=8, vocab=10),
    "codec": dict(width=3),
}
TOY = CostShape(
    model="toy-1",
    label="toy",
    stacks=(Stack("lm", head=("vocab",), sampling=1),),
    row_reads=(KvRead("kv", "lm", 5),),
    prefill=Prefill(7),
    codec=Codec("codec", lambda c: (1e9 * c["width"], 1e6), 100),
    frames_ref=4,
    head=("toy on {gpu}, {setting!r}: {step_params/1e3:.3f} k params, {kernels} kernels",
          "row {row_ms*1e3:.4f} us, codec {codec_frame_ms*1e3:.2f} us/frame"),
    table=SIZES,
)


def test_a_made_up_declaration_costs_what_the_arithmetic_says():
    g = GPUS["h100"]
    bw, fl = g.bandwidth * BW_EFF, g.flops * FLOP_EFF
    # a layer: q/o 2 x 4 x 2 x 2, k/v 2 x 4 x 1 x 2, gated MLP 3 x 4 x 8; two layers and a 10-row head
    params = 2 * (32 + 16 + 96) + 4 * 10
    kernels = 2 * 7 + 3 + 1  # two layers, the model's own 3, one sampling kernel
    kv = 2 * 2 * 1 * 2 * 2 * 5  # layers x K and V x 1 head of 2 x bf16 x 5 positions
    q = TOY.quantities()
    assert (q["step_params"], q["kernels"], q["row_bytes"]) == (328, kernels, kv) and params == 328
    floor = 328 * 2 / bw * 1e3 + kernels * LAUNCH_US / 1e3
    arith = (kv / bw + 2 * 328 / fl) * 1e3
    opt, pess = TOY.terms("h100", "optimistic"), TOY.terms("h100", "pessimistic")
    assert opt["floor_ms"] == pytest.approx(floor) and pess["floor_ms"] == opt["floor_ms"]
    assert opt["row_ms"] == pytest.approx(arith) == opt["arith_row_ms"]
    assert pess["row_ms"] == pytest.approx(arith * ROW_INEFFICIENCY)
    assert opt["prefill_ms"] == pytest.approx(floor + 2 * 328 * 7 / fl * 1e3)
    assert opt["prefill_token_ms"] == pytest.approx(2 * 328 / fl * 1e3)
    assert opt["codec_c0_ms"] == pytest.approx(100 * LAUNCH_US / 1e3)
    assert opt["codec_frame_ms"] == pytest.approx((3e9 / fl + 1e6 / bw) * 1e3)
    assert pess["codec_frame_ms"] == pytest.approx((3e9 / (fl * 0.5) + 1e6 / bw) * 1e3)  # half conv eff
    with pytest.raises(ValueError, match="setting"):
        TOY.terms("h100", "fitted")


def test_the_profile_and_its_head_come_from_the_terms():
    t = TOY.terms("h100", "optimistic")
    prof = TOY.build_profile("h100", "optimistic")
    assert prof["gpu"]["name"] == "h100-optimistic-toy-1"
    assert prof["stages"]["decode"]["ms"][0] == round(t["floor_ms"] + t["row_ms"], 4)
    assert prof["stages"]["codec"]["frames_ref"] == 4
    text = TOY.profile_toml("h100", "optimistic")
    head = f"# toy on h100, 'optimistic': 0.328 k params, 18 kernels\n# row {t['row_ms'] * 1e3:.4f} us"
    assert text.startswith(head)
    assert 'calibration = "toy-optimistic"' in text


def test_steps_per_frame_and_the_template_scale():
    three = replace(TOY, steps_per_frame=3)
    one, t = TOY.terms("h100", "optimistic"), three.terms("h100", "optimistic")
    assert t["floor_ms"] == pytest.approx(3 * one["floor_ms"]) and t["token_floor_ms"] == one["floor_ms"]
    assert t["row_ms"] == pytest.approx(3 * one["row_ms"]) and t["prefill_ms"] == one["prefill_ms"]
    assert fill("{x/1e3:.1f} {x*2:.0f} {y!r}", {"x": 1500, "y": "s"}) == "1.5 3000 's'"


@pytest.mark.parametrize("family", FAMILY_PACKAGES)
def test_every_family_declares_its_cost_through_the_model(family):
    sim = importlib.import_module(f"voxcli.models.{family}.sim")
    assert isinstance(sim.COST, CostShape), f"models/{family}/sim.py declares no COST"
    own = {name for name, f in inspect.getmembers(sim, inspect.isfunction) if f.__module__ == sim.__name__}
    assert not own & {"terms", "build_profile", "profile_toml"}, f"models/{family}/sim.py: {own}"


@pytest.mark.parametrize("family", ["dia", "zonos", "orpheus", "csm", "kyutai_tts", "vibevoice"])
def test_the_shipped_h100_profiles_of_a_family_without_a_fit_are_its_declarations_output(family):
    from voxcli.config import recipe_path

    cost = importlib.import_module(f"voxcli.models.{family}.sim").COST
    files = cost.profiles("h100")
    assert len(files) == 2
    for path, text in files.items():
        assert recipe_path(path.removeprefix("recipes/").removesuffix(".toml")).read_text() == text, path
