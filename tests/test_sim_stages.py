"""The stage shapes several families' cost models share (models/sim_stages.py): one copy each, read from
the families' declared sizes, and no family's cost reading another family's module."""

from __future__ import annotations

import re
from pathlib import Path

from voxcli.models import sim_stages
from voxcli.models.registry import FAMILY_PACKAGES, sim_sizes

ROOT = Path(__file__).resolve().parents[1]
NAMES = "|".join(FAMILY_PACKAGES)
OTHER_FAMILY = re.compile(rf"from \.\.({NAMES})\b|models\.({NAMES})\.")


def test_no_family_cost_model_imports_another_family():
    for family in FAMILY_PACKAGES:
        for name in ("sim.py", "sim_fit.py"):
            path = ROOT / "models" / family / name
            if path.exists():
                found = OTHER_FAMILY.findall(path.read_text())
                assert not found, f"models/{family}/{name} reads another family's module: {found}"


def test_a_decoder_stack_counts_its_weights_and_kv():
    s = {"hidden": 896, "layers": 24, "heads": 14, "kv_heads": 2, "head_dim": 64, "mlp": 4864}
    # Qwen2-0.5B: q/o 2 x 896 x 896, k/v 2 x 896 x 128, gated MLP 3 x 896 x 4864 per layer
    assert sim_stages.gqa_layer_params(s) == 2 * 896 * 896 + 2 * 896 * 128 + 3 * 896 * 4864
    assert sim_stages.stack_params(s, 6564) == 24 * sim_stages.gqa_layer_params(s) + 896 * 6564
    assert sim_stages.kv_bytes(s, 10) == 24 * 2 * 2 * 64 * 2 * 10  # bf16 K and V of every layer


def test_the_shared_codec_decoders_cost_what_their_families_state():
    dac, _ = sim_stages.dac_frame_cost(sim_sizes("dia-1.6b")["dac"])
    assert 1.4e9 < dac < 1.8e9  # Dia's docstring: ~1.6 GFLOP per 512-sample frame
    assert sim_stages.dac_frame_cost(sim_sizes("zonos-v0.1")["dac"]) == sim_stages.dac_frame_cost(
        sim_sizes("dia-1.6b")["dac"])  # the same released decoder
    assert sim_stages.mimi_frame_cost(sim_sizes("csm-1b")["codec"]) == sim_stages.mimi_frame_cost(
        sim_sizes("kyutai-tts-1.6b")["codec"])
    assert sim_stages.hift_frame_flops(sim_sizes("cosyvoice2-0.5b")["hift"]) == sim_stages.hift_frame_flops(
        sim_sizes("cosyvoice3-0.5b")["hift"])
