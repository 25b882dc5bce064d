"""Higgs Audio loading through `models/checkpoint.fill_module` (each tensor read straight from the file into
its parameter, no state dict in between), for the transformers layout and v3's renamed keys: the same
weights as the file, shape errors naming the key and the file, and no tensor left on the meta device."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file


@pytest.fixture(scope="module")
def v2(tmp_path_factory):
    from voxcli.models.higgs_audio.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("higgs_loader") / "v2")


def test_fill_module_loads_the_files_tensors(v2):
    from voxcli.models.higgs_audio.program import HiggsProgram

    program = HiggsProgram.load(str(v2), dtype="bfloat16")
    sd = load_file(str(v2 / "model.safetensors"))
    own = program.weights.state_dict()
    assert set(own) == set(sd)
    for k, v in own.items():
        assert v.dtype == torch.bfloat16 and not v.is_meta
        assert torch.equal(v, sd[k].to(torch.bfloat16)), k


def test_shape_errors_name_the_key_and_the_file(v2, tmp_path):
    from voxcli.models.base import CheckpointError
    from voxcli.models.higgs_audio.program import HiggsProgram

    bad = tmp_path / "bad"
    shutil.copytree(v2, bad)
    sd = load_file(str(bad / "model.safetensors"))
    key = "model.layers.1.mlp.down_proj.weight"
    sd[key] = sd[key][:, :-1].contiguous()
    save_file(sd, str(bad / "model.safetensors"))
    with pytest.raises(CheckpointError, match=rf"{key.replace('.', '[.]')}.*shape") as e:
        HiggsProgram.load(str(bad))
    assert str(bad) in str(e.value)
    sd["model.layers.1.extra.weight"] = torch.zeros(2)
    sd[key] = load_file(str(v2 / "model.safetensors"))[key]
    save_file(sd, str(bad / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"model[.]layers[.]1[.]extra[.]weight"):
        HiggsProgram.load(str(bad))


def test_v3_renamed_keys_fill_the_same_backbone(tmp_path):
    from voxcli.models.higgs_audio.layouts import V3_EMBED
    from voxcli.models.higgs_audio.program import HiggsProgram
    from voxcli.models.higgs_audio.tiny import build_tiny_v3

    root = build_tiny_v3(tmp_path / "v3")
    program = HiggsProgram.load(str(root))
    raw = {}
    for f in sorted(root.glob("*.safetensors")):
        raw.update(load_file(str(f)))
    own = program.weights.state_dict()
    assert torch.equal(own["model.embed_audio_tokens.embed_audio_tokens.weight"], raw[V3_EMBED])
    q = "layers.0.self_attn.q_proj.weight"
    assert torch.equal(own["model." + q], raw["body." + q])
    d = json.loads((root / "config.json").read_text())
    d["text_config"]["num_hidden_layers"] += 1
    (root / "config.json").write_text(json.dumps(d))
    from voxcli.models.base import CheckpointError

    with pytest.raises(CheckpointError, match=r"model[.]layers[.]2[.].* is missing"):
        HiggsProgram.load(str(root))


def test_memory_needs_at_the_released_sizes():
    """The engine's memory plan gets Higgs' per-unit costs: v3 4B's KV is 36 layers x K/V x 8 heads x 128
    in bfloat16 per position; the released tokenizer's decoder state per slot and its weights (~22 M
    parameters) are counted, the latter only while the codec is still to be read."""
    from voxcli.models.higgs_audio.codec import HiggsCodecConfig
    from voxcli.models.higgs_audio.layouts import V3_EMBED, parse_v3
    from voxcli.models.higgs_audio.memory import memory_needs
    from voxcli.models.higgs_audio.tiny import V3_SIZES

    text = {**V3_SIZES["v3-4b"], "vocab_size": 151936, "rope_theta": 1e6}
    cfg = parse_v3({"text_config": text}, {V3_EMBED: (8 * 1026, 2560)}, "config.json")
    needs = memory_needs(cfg, HiggsCodecConfig(), torch.bfloat16, codec_loaded=False)
    assert needs.kv_bytes_per_position == 36 * 2 * 8 * 128 * 2
    assert needs.extra_positions_per_row == 9 and needs.rows_per_request == 1
    assert 15e6 < needs.pending_weight_bytes / 2 < 40e6  # DAC decoder 1024 wide + RVQ + fc2: ~22 M
    assert needs.codec_slot_bytes > 0 and needs.codec_bytes_per_frame > 0
    assert memory_needs(cfg, HiggsCodecConfig(), torch.bfloat16, codec_loaded=True).pending_weight_bytes == 0
