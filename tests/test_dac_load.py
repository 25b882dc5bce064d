"""Dia's DAC codec: strict loading (errors name key and path), weight-norm folding, where the codec comes
from (resolve_codec), the tiny builder, and encode's input errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import huggingface_hub.constants
import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from voxcli.models.base import CheckpointError, InputError
from voxcli.models.codecs.dac.codec import DAC_HUB_ID, DacCodec
from voxcli.models.codecs.dac.tiny import build_tiny_dac
from voxcli.models.dia.checkpoint import resolve_codec

KEY = "decoder.block.1.res_unit2.conv1.weight"


@pytest.fixture(scope="module")
def tiny_dac(tmp_path_factory) -> Path:
    return build_tiny_dac(tmp_path_factory.mktemp("dac_load") / "codec", seed=0)


def _copy(src: Path, dst: Path, edit=None) -> Path:
    shutil.copytree(src, dst)
    if edit is not None:
        f = dst / "model.safetensors"
        sd = load_file(f)
        edit(sd)
        save_file(sd, f)
    return dst


def test_checkpoint_errors_name_key_and_path(tiny_dac, tmp_path):
    def drop(sd):
        del sd[KEY]

    def reshape(sd):
        sd[KEY] = torch.zeros(3, 3)

    def extra(sd):
        sd["decoder.block.9.conv_t1.weight"] = torch.zeros(1)

    def nan(sd):
        sd[KEY][0, 0, 0] = float("nan")

    def half_weight_norm(sd):
        w = sd.pop(KEY)
        sd[KEY[: -len("weight")] + "weight_v"] = w

    for name, edit, words in (
        ("missing", drop, [KEY, "missing"]),
        ("shape", reshape, [KEY, "shape [3, 3]", "[8, 8, 7]"]),
        ("extra", extra, ["decoder.block.9.conv_t1.weight", "unexpected"]),
        ("nan", nan, [KEY, "NaN"]),
        ("half-weight-norm", half_weight_norm, [KEY[: -len("weight")] + "weight_g", "missing"]),
    ):
        ck = _copy(tiny_dac, tmp_path / name, edit)
        with pytest.raises(CheckpointError) as e:
            DacCodec.load(ck)
        msg = str(e.value)
        assert str(ck / "model.safetensors") in msg, msg
        for w in words:
            assert w in msg, (name, msg)

    corrupt = _copy(tiny_dac, tmp_path / "corrupt")
    f = corrupt / "model.safetensors"
    f.write_bytes(f.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match="corrupt"):
        DacCodec.load(corrupt)

    no_config = _copy(tiny_dac, tmp_path / "no-config")
    (no_config / "config.json").unlink()
    with pytest.raises(CheckpointError, match=r"config\.json is missing"):
        DacCodec.load(no_config)

    odd = _copy(tiny_dac, tmp_path / "odd")
    cfg = json.loads((odd / "config.json").read_text())
    cfg["downsampling_ratios"] = [2, 4, 8, 7]
    (odd / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"config\.json.*even"):
        DacCodec.load(odd)

    with pytest.raises(CheckpointError, match="does not exist"):
        DacCodec.load(tmp_path / "nowhere")


def test_weight_norm_keys_fold_to_the_same_decoder(tiny_dac, tmp_path):
    """Both spellings of weight norm (old weight_g/weight_v, torch parametrizations) load to the plain
    weights: g = ||v|| per output row with a scaled v gives back w."""

    def to_weight_norm(sd, g_name, v_name):
        for k in [k for k in sd if k.endswith(".weight") and "codebook" not in k]:
            w = sd.pop(k)
            base = k[: -len("weight")]
            v = 3.0 * w
            sd[base + g_name] = w.norm(dim=(1, 2), keepdim=True)
            sd[base + v_name] = v

    codes = np.random.RandomState(0).randint(0, 1024, size=(12, 9))
    ref = DacCodec.load(tiny_dac, dtype="float64").decode_offline(codes)
    for g_name, v_name in (("weight_g", "weight_v"),
                           ("parametrizations.weight.original0", "parametrizations.weight.original1")):
        ck = _copy(tiny_dac, tmp_path / g_name, lambda sd, g=g_name, v=v_name: to_weight_norm(sd, g, v))
        assert any(k.endswith(g_name) for k in load_file(ck / "model.safetensors"))
        out = DacCodec.load(ck, dtype="float64").decode_offline(codes)
        assert np.abs(out - ref).max() < 1e-5


def test_resolve_codec(tmp_path, monkeypatch):
    dia = tmp_path / "dia"
    (dia / "codec").mkdir(parents=True)
    assert resolve_codec(dia) == dia / "codec"

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(CheckpointError) as e:
        resolve_codec(tmp_path / "bare-dia")
    msg = str(e.value)
    for w in (DAC_HUB_ID, "not in the local Hugging Face cache", f"vox models pull {DAC_HUB_ID}",
              str(tmp_path / "bare-dia" / "codec")):
        assert w in msg, msg


def test_tiny_builder_is_deterministic_and_checks_sizes(tmp_path):
    a = build_tiny_dac(tmp_path / "a", seed=5, decoder_hidden_size=16)
    b = build_tiny_dac(tmp_path / "b", seed=5, decoder_hidden_size=16)
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    cfg = json.loads((a / "config.json").read_text())
    assert cfg["model_type"] == "dac" and cfg["hop_length"] == 512
    assert cfg["upsampling_ratios"] == [8, 8, 4, 2]
    codec = DacCodec.load(a)
    assert (codec.sample_rate, codec.hop_length, codec.codebooks) == (44100, 512, 9)
    with pytest.raises(TypeError, match="unknown size"):
        build_tiny_dac(tmp_path / "c", n_layers=3)


def test_encode_input_errors(tiny_dac):
    codec = DacCodec.load(tiny_dac)
    clip = np.zeros(1000, dtype=np.float32)
    with pytest.raises(InputError, match="24000 Hz.*44100 Hz"):
        codec.encode(clip, 24000)
    with pytest.raises(InputError, match="empty"):
        codec.encode(clip[:0], 44100)
    with pytest.raises(InputError, match="NaN"):
        codec.encode(np.array([0.0, np.nan], dtype=np.float32), 44100)
    with pytest.raises(InputError, match="mono"):
        codec.encode(np.zeros((2, 100), dtype=np.float32), 44100)
    assert codec.encode(clip, 44100).shape == (2, 9)  # 1000 samples pad to 2 hops
