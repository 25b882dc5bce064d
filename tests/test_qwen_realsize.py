"""The real-size random checkpoint builder ("0.6b" / "1.7b"; voxcli.models.qwen3_tts.realsize)
writes exactly the real architecture: its config.json parses into the dims of
`qwen3_tts_sizes.real_config` and instantiates (on the meta device, no 4 GB build) with the real
parameter counts. The real-size speech tokenizer config has the decoder of the design notes and
transformers' MimiConfig encoder defaults."""

from __future__ import annotations

import pytest
import torch
from voxcli.models.qwen3_tts.config import parse_config
from voxcli.models.qwen3_tts.sizes import real_config
from voxcli.models.qwen3_tts.talker import Qwen3TTSWeights
from voxcli.models.qwen3_tts.tiny import build_tiny, make_config, tiny_tokenizer
from voxcli.models.qwen3_tts.tiny_audio import speech_tokenizer_config

SIZES = [("0.6b", "0.6B", 906, "0b6"), ("1.7b", "1.7B", 1917, "1b7")]


@pytest.fixture(scope="module")
def tok():
    return tiny_tokenizer()


def _block_dims(b) -> tuple:
    return (b.hidden_size, b.intermediate_size, b.num_hidden_layers, b.num_attention_heads,
            b.num_key_value_heads, b.head_dim, b.rope_theta, b.rms_norm_eps)


@pytest.mark.parametrize("size, real, millions, model_size", SIZES)
def test_real_size_config_is_the_real_architecture(tok, size, real, millions, model_size):
    built = parse_config(make_config("custom_voice", False, size, tok))
    ref = parse_config(real_config(real))
    b, r = built.talker, ref.talker
    assert _block_dims(b.block) == _block_dims(r.block)
    assert _block_dims(b.predictor.block) == _block_dims(r.predictor.block)
    assert (b.vocab_size, b.text_vocab_size, b.text_hidden_size, b.num_code_groups) == (
        r.vocab_size, r.text_vocab_size, r.text_hidden_size, r.num_code_groups)
    assert (b.predictor.vocab_size, b.predictor.num_code_groups) == (r.predictor.vocab_size, 16)
    assert (b.codec_pad_id, b.codec_bos_id, b.codec_eos_id) == (2148, 2149, 2150)
    assert built.model_size == model_size
    raw = make_config("custom_voice", False, size, tok)["talker_config"]
    assert raw["rope_scaling"]["mrope_section"] == [24, 20, 20]
    # the tiny tokenizer's ids (specials 500-502) fit inside the real text vocabulary
    assert max(built.tts_pad_id, built.tts_bos_id, built.tts_eos_id) < b.text_vocab_size
    assert tok.token_id("<|im_end|>") < b.text_vocab_size


@pytest.mark.parametrize("size, real, millions, model_size", SIZES)
def test_real_size_instantiates_with_the_real_parameter_count(tok, size, real, millions, model_size):
    with torch.device("meta"):
        w = Qwen3TTSWeights(parse_config(make_config("custom_voice", False, size, tok)).talker)
    n = sum(p.numel() for p in w.parameters())
    assert abs(n / 1e6 - millions) <= 0.01 * millions, n
    with torch.device("meta"):
        ref = Qwen3TTSWeights(parse_config(real_config(real)).talker)
    shapes = {k: tuple(v.shape) for k, v in w.state_dict().items()}
    assert shapes == {k: tuple(v.shape) for k, v in ref.state_dict().items()}
    has_proj = "talker.code_predictor.small_to_mtp_projection.weight" in shapes
    assert has_proj == (size == "1.7b")


def test_real_speech_tokenizer_config_has_the_real_decoder_and_mimi_encoder():
    cfg = speech_tokenizer_config("real")
    dec, enc = cfg["decoder_config"], cfg["encoder_config"]
    assert (dec["codebook_size"], dec["codebook_dim"], dec["latent_dim"], dec["hidden_size"]) == (
        2048, 512, 1024, 512)
    assert (dec["num_hidden_layers"], dec["num_attention_heads"], dec["head_dim"]) == (8, 16, 64)
    assert (dec["intermediate_size"], dec["sliding_window"], dec["decoder_dim"]) == (1024, 72, 1536)
    assert (enc["hidden_size"], enc["num_filters"], enc["num_hidden_layers"], enc["num_quantizers"]) == (
        512, 64, 8, 32)
    assert (enc["codebook_dim"], enc["upsample_groups"], enc["intermediate_size"]) == (256, 512, 2048)


def test_real_sizes_refuse_tiny_only_options(tmp_path):
    with pytest.raises(ValueError, match="tiny sizes only"):
        build_tiny(tmp_path / "x", size="1.7b", proj=True)
    with pytest.raises(ValueError, match="fixed frame counts"):
        build_tiny(tmp_path / "x", size="0.6b", eos_hazard=0.05)
    assert not (tmp_path / "x").exists()
