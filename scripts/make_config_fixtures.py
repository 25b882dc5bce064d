"""Write the config.json fixtures of tests/fixtures/configs/: small Qwen3-TTS and Dia configs saved by a
given transformers version's own `save_pretrained`, so the parsers are tested on what each version
really writes (top-level ids or ids in sub-configs, rope_theta or rope_parameters, absent keys).

Run it with the interpreter of the transformers version to capture (nothing from voxcli is imported
there, so it needs only transformers, and qwen-tts for the Qwen3-TTS config class):

  # 1. the Qwen3-TTS input: the tiny builders' config dicts (project venv)
  .venv/bin/python scripts/make_config_fixtures.py --dump-qwen-input /tmp/qwen-input.json
  # 2. transformers 4.57.3 + qwen-tts 0.1.1 (the oracle venv, scripts/setup_oracle.sh)
  /work/oracle-venv/bin/python scripts/make_config_fixtures.py /tmp/qwen-input.json tests/fixtures/configs
  # 3. transformers 5.23.0 (+ torch 2.13.0 first, qwen-tts 0.1.1 installed with --no-deps)
  /work/venvs/tf5/bin/python scripts/make_config_fixtures.py /tmp/qwen-input.json tests/fixtures/configs

Each writes OUT/<family>-tf<version>/: config.json, generation_config.json, and the codec's config
(codec/config.json for Dia's DAC, speech_tokenizer/config.json for Qwen3-TTS).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def dump_qwen_input(path: Path) -> None:
    """The tiny builders' Qwen3-TTS config dicts: the model's and its speech tokenizer's."""
    from voxcli.models.qwen3_tts.tiny import make_config, tiny_tokenizer
    from voxcli.models.qwen3_tts.tiny_audio import speech_tokenizer_config

    path.write_text(json.dumps({"model": make_config("custom_voice", False, "tiny", tiny_tokenizer()),
                                "speech_tokenizer": speech_tokenizer_config("tiny")}, indent=1))


def save_dia(out: Path, version: str) -> None:
    from transformers import DiaConfig, DiaDecoderConfig, DiaEncoderConfig

    # non-default RoPE thetas (5000 / 20000), so a parser that ignores where they are stored fails
    rope = ({"rope_theta": 5000.0}, {"rope_theta": 20000.0})
    if int(version.split(".")[0]) >= 5:
        rope = tuple({"rope_parameters": {"rope_type": "default", **r}} for r in rope)
    enc = DiaEncoderConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=4, head_dim=16, vocab_size=256, max_position_embeddings=128,
                           **rope[0])
    dec = DiaDecoderConfig(hidden_size=96, intermediate_size=192, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, head_dim=24, cross_num_attention_heads=4,
                           cross_num_key_value_heads=4, cross_head_dim=16, cross_hidden_size=64,
                           vocab_size=1028, num_channels=9, max_position_embeddings=256, **rope[1])
    DiaConfig(encoder_config=enc, decoder_config=dec).save_pretrained(out)
    save_dac(out)
    save_generation(out, dict(bos_token_id=1026, eos_token_id=1024, pad_token_id=1025, do_sample=True,
                              guidance_scale=3.0, temperature=1.8, top_k=45, top_p=0.9, max_length=3072))


def save_dac(out: Path) -> None:
    from transformers import DacConfig

    DacConfig(encoder_hidden_size=8, downsampling_ratios=[2, 4, 8, 8], decoder_hidden_size=64, n_codebooks=9,
              codebook_size=1024, codebook_dim=8, sampling_rate=44100).save_pretrained(out / "codec")


def save_generation(out: Path, fields: dict) -> None:
    from transformers import GenerationConfig

    GenerationConfig(**fields).save_pretrained(out)


def _qwen_config_module(relative: str):
    """One qwen-tts configuration module alone (found, not imported: the package's __init__ pulls in the
    inference code and its audio dependencies)."""
    import importlib.util

    package = importlib.util.find_spec("qwen_tts")
    path = Path(list(package.submodule_search_locations)[0]) / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def save_qwen(source: Path, out: Path, version: str) -> None:
    inputs = json.loads(source.read_text())
    model = _qwen_config_module("core/models/configuration_qwen3_tts.py")
    model.Qwen3TTSConfig(**inputs["model"]).save_pretrained(out)
    st = inputs["speech_tokenizer"]
    # non-default RoPE thetas (encoder: transformers' MimiConfig; decoder: qwen-tts's own class)
    st["encoder_config"].pop("rope_theta", None)
    st["encoder_config"].update({"rope_parameters": {"rope_type": "default", "rope_theta": 5000.0}}
                                if int(version.split(".")[0]) >= 5 else {"rope_theta": 5000.0})
    st["decoder_config"]["rope_theta"] = 20000.0
    tokenizer = _qwen_config_module("core/tokenizer_12hz/configuration_qwen3_tts_tokenizer_v2.py")
    tokenizer.Qwen3TTSTokenizerV2Config(**st).save_pretrained(out / "speech_tokenizer")
    # the official checkpoints' sampling defaults, with sub-talker fields GenerationConfig keeps as extras
    save_generation(out, dict(do_sample=True, temperature=0.8, top_k=40, top_p=0.95, repetition_penalty=1.1,
                              subtalker_dosample=True, subtalker_temperature=0.7, subtalker_top_k=30,
                              subtalker_top_p=0.9, max_new_tokens=4096))


def main() -> None:
    if sys.argv[1:2] == ["--dump-qwen-input"]:
        dump_qwen_input(Path(sys.argv[2]))
        return
    import transformers

    source, out = Path(sys.argv[1]), Path(sys.argv[2])
    v = transformers.__version__
    save_dia(out / f"dia-tf{v}", v)
    save_qwen(source, out / f"qwen3_tts-tf{v}", v)
    print(f"wrote {out}/dia-tf{v} and {out}/qwen3_tts-tf{v} with transformers {v}")


if __name__ == "__main__":
    main()
