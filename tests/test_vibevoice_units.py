"""VibeVoice pieces that need no checkpoint: a frame's PCM survives the engine's int64 code array bit for bit
(the codec lane only unpacks it), the DPM-Solver schedule is diffusers' for 10 steps on 1000 train steps,
scheduler settings it does not implement are refused by name, and the sim profile's cost per step grows
with the batch from a floor that holds the 10 solver passes' weight reads."""

from __future__ import annotations

import numpy as np
import pytest
from voxcli.models.base import CheckpointError
from voxcli.models.vibevoice.program import pack_pcm, unpack_pcm
from voxcli.models.vibevoice.solver import SolverPlan


def test_pcm_travels_bit_exact_in_the_code_array():
    pcm = (np.random.RandomState(0).randn(3200) * 0.3).astype(np.float32)
    pcm[:3] = [0.0, -0.0, 1e-38]
    codes = pack_pcm(pcm)
    assert codes.dtype == np.int64 and codes.shape == (3200,)
    back = unpack_pcm(codes)
    assert back.tobytes() == pcm.tobytes()


def test_solver_schedule_is_diffusers_linspace():
    plan = SolverPlan({"beta_schedule": "squaredcos_cap_v2", "prediction_type": "v_prediction"}, 10)
    assert [s.timestep for s in plan.steps] == [999, 899, 799, 699, 599, 500, 400, 300, 200, 100]
    assert plan.steps[0].first_order and plan.steps[-1].first_order  # warm-up and the final sigma 0
    assert not any(s.first_order for s in plan.steps[1:-1])


def test_unsupported_scheduler_settings_are_refused_by_name():
    with pytest.raises(CheckpointError, match="solver_type = 'heun' is not supported"):
        SolverPlan({"solver_type": "heun"}, 10)
    with pytest.raises(CheckpointError, match="use_foo is not supported"):
        SolverPlan({"use_foo": True}, 10)


def test_sim_profile_prices_the_solver_and_the_guidance_rows():
    from voxcli.models.vibevoice import sim

    pess, opt = sim.COST.terms("h100", "pessimistic"), sim.COST.terms("h100", "optimistic")
    assert 5 < pess["floor_ms"] < 7 and pess["floor_ms"] == opt["floor_ms"]
    assert pess["row_ms"] > opt["row_ms"] > 0
    q = sim.COST.quantities()
    assert q["params_head"] * sim.SOLVER_STEPS > 0.8 * q["params_lm"]  # the solver's reads rival the LM's
