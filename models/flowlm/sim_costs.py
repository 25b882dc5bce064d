"""Cost arithmetic that the simulated profiles of upstream's CosyVoice models share: the LM side (a Qwen2
decode step over a prompt-plus-half-utterance context, and the prompt's prefill) on a model's declared
sizes, the 24 kHz HiFT's convolution FLOPs (CosyVoice 2 and 3 ship the same dimensions: base 512,
rates 8/5/3), and reading a fitted parameter back from a shipped profile's header."""

from __future__ import annotations

import re

from ..registry import sim_sizes
from ..sim_priors import BW_EFF, BYTES_BF16, FLOP_EFF, GPUS, LAUNCH_US, ROW_INEFFICIENCY

CTX_POSITIONS = 150 + 125  # prompt (~75 prompt-text + text ids, ~75 prompt speech tokens) + half of 10 s
PROMPT_POSITIONS = 150


def lm_params(model: str) -> int:
    m = sim_sizes(model)["lm"]
    h, hd = m["hidden"], m["head_dim"]
    per_layer = 2 * h * m["heads"] * hd + 2 * h * m["kv_heads"] * hd + 3 * h * m["mlp"]
    return m["layers"] * per_layer + h * m["vocab"]


def lm_row_bytes(model: str) -> float:
    m = sim_sizes(model)["lm"]
    return CTX_POSITIONS * m["layers"] * 2 * m["kv_heads"] * m["head_dim"] * BYTES_BF16


def kernels_per_step(model: str) -> int:
    return sim_sizes(model)["lm"]["layers"] * 7 + 3 + 6


def lm_terms(model: str, gpu_name: str, pessimistic: bool) -> dict[str, float]:
    """The LM lane's terms of a profile: the decode step's floor and per-row cost, the prefill's."""
    gpu = GPUS[gpu_name]
    bw, fl = gpu.bandwidth * BW_EFF, gpu.flops * FLOP_EFF
    params = lm_params(model)
    arith_row = (lm_row_bytes(model) / bw + 2 * params / fl) * 1e3
    floor = params * BYTES_BF16 / bw * 1e3 + kernels_per_step(model) * LAUNCH_US / 1e3
    return {
        "floor_ms": floor,
        "row_ms": arith_row * (ROW_INEFFICIENCY if pessimistic else 1.0),
        "arith_row_ms": arith_row,
        "prefill_ms": floor + 2 * params * PROMPT_POSITIONS / fl * 1e3,
        "prefill_token_ms": 2 * params / fl * 1e3,
    }


def hift_frame_flops() -> float:
    """Convolution FLOPs per mel frame: conv_pre, three upsampling convs, 3 x 3 x 2 residual convs per
    stage (kernels 3, 7, 11), the source branch's residual blocks (kernels 7, 7, 11), conv_post."""
    base, ups = 512, (8, 5, 3)
    kup = (16, 11, 7)
    f = 2 * 80 * base * 5
    rate = 1
    ch = base
    for i, (u, k) in enumerate(zip(ups, kup, strict=True)):
        rate *= u
        out = ch // 2
        f += 2 * ch * out * k * rate
        f += 2 * out * out * (3 + 7 + 11) * 2 * 3 * rate  # resblocks
        f += 2 * out * out * ((7, 7, 11)[i]) * 2 * 3 * rate  # source resblocks
        ch = out
    f += 2 * ch * 18 * 7 * rate
    return float(f)


def shipped_fitted(text: str, name: str) -> float:
    """The fitted `name` a shipped pessimistic profile was written with (its `# name X: FITTED` line)."""
    found = re.search(rf"^# {re.escape(name)} ([0-9.]+): FITTED", text, re.M)
    if found is None:
        raise ValueError(f"the profile names no fitted {name} in its header")
    return float(found.group(1))
