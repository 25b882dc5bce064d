"""The diffusion head's sampler: diffusers' `DPMSolverMultistepScheduler` as VibeVoice's
generation_config.json names it (DPM-Solver++ 2M, midpoint, v-prediction, cosine "squaredcos_cap_v2"
betas, `linspace` timesteps, final sigma 0, lower-order steps at the end), computed the way diffusers 0.42
computes it so that a frame's latent matches the reference's to float32 rounding.

Every frame runs the same schedule, so its scalars are computed once (`SolverPlan`) and each step is two
fused multiply-adds over the whole batch of frames: the state a frame carries between steps is its sample
and the previous step's x0 prediction. A config key this module does not implement is refused by name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..base import CheckpointError

# (key, the only value implemented); other keys of the scheduler's config are refused when they differ
IMPLEMENTED: dict[str, Any] = {
    "beta_schedule": "squaredcos_cap_v2",
    "prediction_type": "v_prediction",
    "solver_order": 2,
    "algorithm_type": "dpmsolver++",
    "solver_type": "midpoint",
    "lower_order_final": True,
    "euler_at_final": False,
    "use_karras_sigmas": False,
    "use_lu_lambdas": False,
    "use_exponential_sigmas": False,
    "use_beta_sigmas": False,
    "use_flow_sigmas": False,
    "final_sigmas_type": "zero",
    "timestep_spacing": "linspace",
    "thresholding": False,
    "rescale_betas_zero_snr": False,
    "variance_type": None,
    "steps_offset": 0,
    "lambda_min_clipped": -math.inf,
}
FREE = {"num_train_timesteps", "beta_start", "beta_end", "trained_betas", "dynamic_thresholding_ratio",
        "sample_max_value", "flow_shift", "shift_terminal", "use_dynamic_shifting", "time_shift_type"}


def _cosine_betas(n: int, max_beta: float = 0.999) -> torch.Tensor:
    def alpha_bar(t: float) -> float:
        return math.cos((t + 0.008) / 1.008 * math.pi / 2) ** 2

    return torch.tensor([min(1 - alpha_bar((i + 1) / n) / alpha_bar(i / n), max_beta) for i in range(n)],
                        dtype=torch.float32)


@dataclass(frozen=True)
class Step:
    timestep: int
    alpha_s: torch.Tensor  # 0-d float32: this step's alpha / sigma (x0 from v)
    sigma_s: torch.Tensor
    first_order: bool
    c_sample: torch.Tensor  # x_next = c_sample * x - c_d0 * D0 (- 0.5 * c_d0 * D1 in second order)
    c_d0: torch.Tensor
    r0: torch.Tensor | None  # h_prev / h (second order)


class SolverPlan:
    def __init__(self, config: dict[str, Any], steps: int) -> None:
        for key, value in config.items():
            if key in FREE or key.startswith("_"):
                continue
            if key not in IMPLEMENTED:
                raise CheckpointError(f"noise_scheduler_config.{key} is not supported by voxcli's DPM-Solver")
            want = IMPLEMENTED[key]
            if value != want and not (want == -math.inf and value is not None and float(value) == -math.inf):
                raise CheckpointError(f"noise_scheduler_config.{key} = {value!r} is not supported "
                                      f"(only {want!r})")
        if config.get("trained_betas") is not None:
            raise CheckpointError("noise_scheduler_config.trained_betas is not supported")
        n = int(config.get("num_train_timesteps", 1000))
        if steps < 1:
            raise CheckpointError(f"num_diffusion_steps must be >= 1, got {steps}")
        alphas_cumprod = torch.cumprod(1.0 - _cosine_betas(n), dim=0)
        timesteps = np.linspace(0, n - 1, steps + 1).round()[::-1][:-1].copy().astype(np.int64)
        table = (((1 - alphas_cumprod) / alphas_cumprod) ** 0.5).numpy()  # what np.array(tensor) gives
        sigmas = np.interp(timesteps, np.arange(0, len(table)), table)
        sigmas = np.concatenate([sigmas, [0]]).astype(np.float32)
        sig = torch.from_numpy(sigmas)

        def alpha_sigma(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            a = 1 / ((s**2 + 1) ** 0.5)
            return a, s * a

        self.steps: list[Step] = []
        for i, t in enumerate(timesteps.tolist()):
            a_s, s_s = alpha_sigma(sig[i])
            a_t, s_t = alpha_sigma(sig[i + 1])
            lam_t = torch.log(a_t) - torch.log(s_t)
            lam_s = torch.log(a_s) - torch.log(s_s)
            h = lam_t - lam_s
            last = i == len(timesteps) - 1
            first = i == 0 or last  # lower_order_nums < 1, or the final step (final sigma 0)
            r0 = None
            if not first:
                a_p, s_p = alpha_sigma(sig[i - 1])
                lam_p = torch.log(a_p) - torch.log(s_p)
                r0 = (lam_s - lam_p) / h
            self.steps.append(Step(int(t), a_s, s_s, first, s_t / s_s, a_t * (torch.exp(-h) - 1.0), r0))

    def sample(self, noise: torch.Tensor, predict) -> torch.Tensor:
        """Run the schedule from `noise` [N, D]; `predict(x, timestep)` returns the guided v-prediction
        [N, D] for the current samples. Returns the final samples (float32 arithmetic, as diffusers)."""
        x = noise
        prev_x0: torch.Tensor | None = None
        for st in self.steps:
            v = predict(x, st.timestep)
            x0 = st.alpha_s * x - st.sigma_s * v
            xs = x.to(torch.float32)
            if st.first_order or prev_x0 is None:
                nxt = st.c_sample * xs - st.c_d0 * x0
            else:
                d1 = (1.0 / st.r0) * (x0 - prev_x0)
                nxt = st.c_sample * xs - st.c_d0 * x0 - 0.5 * st.c_d0 * d1
            x = nxt.to(v.dtype)
            prev_x0 = x0
        return x
