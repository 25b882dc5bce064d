"""Each family's config parser reads what transformers 4.5x and 5.x `save_pretrained` write (issue 23).

The fixtures tests/fixtures/configs/<family>-tf<version>/{config,generation_config}.json were written by
each version's own `save_pretrained`, by tests/fixtures/make_config_fixtures.py (its docstring: the commands):
  - tf4.57.3: /work/oracle-venv/bin/python (transformers 4.57.3, qwen-tts 0.1.1)
  - tf5.23.0: /work/venvs/tf5/bin/python (torch 2.13.0, transformers 5.23.0, qwen-tts 0.1.1 --no-deps)
5.23 writes Dia's special ids as null at the top (they live in decoder_config), `rope_parameters`
instead of `rope_theta`, and Qwen3-TTS's talker RoPE as `rope_parameters` with mrope keys inside.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from voxcli.models.base import CheckpointError
from voxcli.models.dia.config import parse_config as parse_dia
from voxcli.models.qwen3_tts.config import parse_config as parse_qwen

FIXTURES = Path(__file__).parent / "fixtures" / "configs"
VERSIONS = ("4.57.3", "5.23.0")


def fixture(family: str, version: str) -> tuple[dict, str]:
    path = FIXTURES / f"{family}-tf{version}" / "config.json"
    d = json.loads(path.read_text())
    assert d["transformers_version"] == version
    return d, str(path)


@pytest.mark.parametrize("version", VERSIONS)
def test_dia_config_of_each_transformers_version(version):
    cfg = parse_dia(*fixture("dia", version))
    assert cfg.encoder.rope_theta == 5000.0 and cfg.decoder.rope_theta == 20000.0  # not the 10000 default
    assert (cfg.eos_token_id, cfg.pad_token_id, cfg.bos_token_id) == (1024, 1025, 1026)
    assert cfg.decoder.head_dim == 24 and cfg.decoder.num_key_value_heads == 2
    assert cfg.encoder.hidden_size == 64


def test_dia_versions_parse_to_the_same_config():
    assert parse_dia(*fixture("dia", "4.57.3")) == parse_dia(*fixture("dia", "5.23.0"))


def test_dia_5x_keeps_ids_in_the_decoder_config():
    d, where = fixture("dia", "5.23.0")
    assert d["eos_token_id"] is None and d["decoder_config"]["eos_token_id"] == 1024  # what 5.23 wrote
    d["decoder_config"]["eos_token_id"] = 1027  # the decoder's value is the one read
    assert parse_dia(d, where).eos_token_id == 1027


@pytest.mark.parametrize("version", VERSIONS)
def test_qwen_config_of_each_transformers_version(version):
    cfg = parse_qwen(*fixture("qwen3_tts", version))
    assert cfg.talker.block.rope_theta == 1e6 and cfg.talker.predictor.block.rope_theta == 1e6
    assert cfg.talker.speaker_ids and cfg.talker.language_ids


def test_qwen_versions_parse_to_the_same_config():
    a, b = (replace(parse_qwen(*fixture("qwen3_tts", v)), raw={}) for v in VERSIONS)
    assert a == b


def test_qwen_rope_parameters_alone_are_read():
    """5.x may write only rope_parameters (no top-level rope_theta)."""
    d, where = fixture("qwen3_tts", "5.23.0")
    for block in (d["talker_config"], d["talker_config"]["code_predictor_config"]):
        block.pop("rope_theta")
        block["rope_parameters"]["rope_theta"] = 5e5
    cfg = parse_qwen(d, where)
    assert cfg.talker.block.rope_theta == 5e5 and cfg.talker.predictor.block.rope_theta == 5e5


def _set(d: dict, dotted: str, value) -> dict:
    *path, last = dotted.split(".")
    for k in path:
        d = d[k]
    d[last] = value
    return d


@pytest.mark.parametrize("family,key,value,words", [
    ("dia", "decoder_config.head_dim", "abc", ["decoder_config", "head_dim", "'abc'", "integer"]),
    ("dia", "eos_token_id", "x", ["eos_token_id", "'x'", "integer"]),
    ("dia", "decoder_config.rope_parameters", {"rope_type": "yarn", "factor": 2.0},
     ["decoder_config", "rope_parameters", "not supported"]),
    ("dia", "encoder_config.norm_eps", "tiny", ["encoder_config", "norm_eps", "number"]),
    ("dia", "decoder_config", [1, 2], ["decoder_config", "object"]),
    ("qwen3_tts", "talker_config.codec_pad_id", None, ["talker_config", "no field 'codec_pad_id'"]),
    ("qwen3_tts", "talker_config.hidden_size", 64.5, ["talker_config", "hidden_size", "integer"]),
    ("qwen3_tts", "talker_config.spk_id", [1, 2], ["spk_id", "object"]),
    ("qwen3_tts", "talker_config.code_predictor_config.rope_theta", 1.0,
     ["code_predictor_config", "rope_theta", "disagree"]),
])
def test_a_field_that_cannot_be_read_is_one_checkpoint_sentence(family, key, value, words):
    d, where = fixture(family, "5.23.0")
    _set(d, key, value)
    with pytest.raises(CheckpointError) as e:
        (parse_dia if family == "dia" else parse_qwen)(d, where)
    message = str(e.value)
    assert where in message and all(w in message for w in words), message
    assert "\n" not in message


def as_written_by_tf5_dia(d: dict) -> dict:
    """A 4.5x-style Dia config.json rewritten the way 5.23's save_pretrained writes it (compare the two
    fixtures): top-level ids null, the ids in decoder_config, rope_parameters instead of rope_theta."""
    d = json.loads(json.dumps(d))
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        d["decoder_config"][key] = d.get(key, {"bos_token_id": 1026, "eos_token_id": 1024,
                                               "pad_token_id": 1025}[key])
        d[key] = None
    for sub in ("encoder_config", "decoder_config"):
        s = d.setdefault(sub, {})
        s.pop("rope_scaling", None)
        s["rope_parameters"] = {"rope_theta": s.pop("rope_theta", 10000.0), "rope_type": "default"}
    d["transformers_version"] = "5.23.0"
    return d


def _vox(*args: str, env_cache: Path) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "voxcli", *args], capture_output=True, text=True,
                          env={**os.environ, "VOX_CACHE": str(env_cache)}, timeout=300)


def test_a_dia_checkpoint_saved_by_transformers_5_loads(tmp_path):
    """It used to fail with "internal error: TypeError: int() argument must be ... not 'NoneType'"."""
    from voxcli.models import load_model
    from voxcli.models.dia.tiny import build_tiny

    old = build_tiny(tmp_path / "dia-4x", size="tiny")
    new = tmp_path / "dia-5x"
    import shutil

    shutil.copytree(old, new)
    cfg = json.loads((old / "config.json").read_text())
    (new / "config.json").write_text(json.dumps(as_written_by_tf5_dia(cfg), indent=2))
    a, b = load_model(str(old)), load_model(str(new))
    assert a.cfg == b.cfg
    assert replace(a.spec, name="") == replace(b.spec, name="")
    r = _vox("voices", "-m", str(new), env_cache=tmp_path / "cache")
    assert r.returncode == 0 and "internal error" not in r.stderr, r.stderr
    # and a field it cannot read is a one-line checkpoint error through the CLI, not "internal error"
    bad = json.loads((new / "config.json").read_text())
    bad["decoder_config"]["num_hidden_layers"] = "eighteen"
    (new / "config.json").write_text(json.dumps(bad))
    r = _vox("voices", "-m", str(new), env_cache=tmp_path / "cache")
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("vox: error: ") and "internal error" not in r.stderr, r.stderr
    assert "num_hidden_layers" in r.stderr and str(new / "config.json") in r.stderr, r.stderr


def test_a_qwen_checkpoint_saved_by_transformers_5_loads(tmp_path, tiny_custom_voice):
    """The tiny checkpoint's config rewritten the way 5.23 writes it (rope_parameters with the mrope keys
    inside and rope_theta beside them) loads to the same program config."""
    import shutil

    from voxcli.models import load_model

    new = tmp_path / "qwen-5x"
    shutil.copytree(tiny_custom_voice, new)
    d = json.loads((new / "config.json").read_text())
    t = d["talker_config"]
    t["rope_parameters"] = {**t.pop("rope_scaling"), "rope_theta": t["rope_theta"]}
    p = t["code_predictor_config"]
    p["rope_parameters"] = {"rope_theta": p["rope_theta"], "rope_type": "default"}
    (new / "config.json").write_text(json.dumps(d, indent=2))
    a, b = load_model(str(tiny_custom_voice)), load_model(str(new))
    assert replace(a.cfg, raw={}) == replace(b.cfg, raw={})


@pytest.mark.parametrize("version", VERSIONS)
def test_generation_configs_of_each_transformers_version(version):
    from voxcli.models.dia.config import GenerationDefaults as DiaGeneration
    from voxcli.models.qwen3_tts.config import GenerationDefaults as QwenGeneration

    path = FIXTURES / f"dia-tf{version}" / "generation_config.json"
    g = DiaGeneration.from_dict(json.loads(path.read_text()), str(path))
    assert (g.do_sample, g.temperature, g.top_k, g.top_p, g.guidance_scale, g.max_length) == \
        (True, 1.8, 45, 0.9, 3.0, 3072)
    path = FIXTURES / f"qwen3_tts-tf{version}" / "generation_config.json"
    q = QwenGeneration.from_dict(json.loads(path.read_text()), str(path))
    assert (q.temperature, q.top_k, q.repetition_penalty, q.subtalker_top_k, q.max_new_tokens) == \
        (0.8, 40, 1.1, 30, 4096)


@pytest.mark.parametrize("family", ["dia", "qwen3_tts"])
def test_an_unreadable_generation_field_is_one_checkpoint_sentence(family):
    from voxcli.models.dia.config import GenerationDefaults as DiaGeneration
    from voxcli.models.qwen3_tts.config import GenerationDefaults as QwenGeneration

    path = FIXTURES / f"{family}-tf5.23.0" / "generation_config.json"
    d = {**json.loads(path.read_text()), "temperature": "warm"}
    with pytest.raises(CheckpointError, match=r"generation_config.json: temperature is 'warm', expected a"):
        (DiaGeneration if family == "dia" else QwenGeneration).from_dict(d, str(path))
    d = {**json.loads(path.read_text()), "top_k": None}  # null: off (Dia) / the default (Qwen), no crash
    (DiaGeneration if family == "dia" else QwenGeneration).from_dict(d, str(path))


@pytest.mark.parametrize("version", VERSIONS)
def test_codec_configs_of_each_transformers_version(version):
    """The codecs' configs too: Dia's DAC (transformers DacConfig) and Qwen3-TTS's speech tokenizer (a
    transformers MimiConfig encoder, whose 5.x form has rope_parameters and no rope_theta)."""
    from voxcli.models.codecs.dac.config import DacCodecConfig
    from voxcli.models.qwen3_tts.codec import CodecDecoderConfig
    from voxcli.models.qwen3_tts.mimi_encoder import MimiEncoderConfig

    dac = DacCodecConfig.read(FIXTURES / f"dia-tf{version}" / "codec" / "config.json")
    assert (dac.hop_length, dac.n_codebooks, dac.sampling_rate) == (512, 9, 44100)
    assert dac.decoder_hidden_size == 64
    path = FIXTURES / f"qwen3_tts-tf{version}" / "speech_tokenizer" / "config.json"
    st = json.loads(path.read_text())
    enc = MimiEncoderConfig.from_dict(st["encoder_config"], f"{path} encoder_config")
    dec = CodecDecoderConfig.from_dict(st["decoder_config"], f"{path} decoder_config")
    assert enc.rope_theta == 5000.0 and dec.rope_theta == 20000.0  # not the 10000 defaults
    assert enc.upsampling_ratios == (8, 6, 5, 4) and dec.samples_per_frame == 1920


def test_codec_configs_agree_across_versions():
    from voxcli.models.qwen3_tts.codec import CodecDecoderConfig
    from voxcli.models.qwen3_tts.mimi_encoder import MimiEncoderConfig

    parsed = []
    for v in VERSIONS:
        st = json.loads((FIXTURES / f"qwen3_tts-tf{v}" / "speech_tokenizer" / "config.json").read_text())
        parsed.append((MimiEncoderConfig.from_dict(st["encoder_config"]),
                       CodecDecoderConfig.from_dict(st["decoder_config"])))
    assert parsed[0] == parsed[1]


def test_an_unreadable_codec_field_is_one_checkpoint_sentence():
    from voxcli.models.qwen3_tts.mimi_encoder import MimiEncoderConfig

    path = FIXTURES / "qwen3_tts-tf5.23.0" / "speech_tokenizer" / "config.json"
    enc = {**json.loads(path.read_text())["encoder_config"], "num_hidden_layers": None, "hidden_size": "wide"}
    with pytest.raises(CheckpointError, match=r"encoder_config: hidden_size is 'wide', expected an integer"):
        MimiEncoderConfig.from_dict(enc, f"{path} encoder_config")
