"""Real Qwen3-TTS sizes on the meta device (no weights): parameter counts and the loader's key/shape check."""

from __future__ import annotations

import pytest
import torch
from voxcli.models.base import CheckpointError
from voxcli.models.checkpoint import check_state_dict
from voxcli.models.qwen3_tts.config import parse_config
from voxcli.models.qwen3_tts.sizes import real_config
from voxcli.models.qwen3_tts.talker import Qwen3TTSWeights


def _meta(size: str, variant: str = "custom_voice") -> Qwen3TTSWeights:
    with torch.device("meta"):
        return Qwen3TTSWeights(parse_config(real_config(size, variant)).talker)


@pytest.mark.parametrize("size, millions", [("0.6B", 906), ("1.7B", 1917)])
def test_parameter_count(size, millions):
    # Talker + code predictor incl. the 311 M text embedding (the official model without codec).
    n = sum(p.numel() for p in _meta(size).parameters())
    assert abs(n / 1e6 - millions) <= 0.01 * millions


def test_real_key_names_pass_the_loader_check_and_mismatches_are_named():
    w = _meta("1.7B", "base")
    sd = dict(w.state_dict())  # meta tensors: only names and shapes matter to the check
    assert "talker.code_predictor.small_to_mtp_projection.weight" in sd
    assert tuple(sd["talker.model.text_embedding.weight"].shape) == (151936, 2048)
    check_state_dict(w, sd, "/ckpt/1.7B")
    missing = {k: v for k, v in sd.items() if k != "talker.model.norm.weight"}
    with pytest.raises(CheckpointError, match=r"/ckpt/1\.7B.*'talker\.model\.norm\.weight'"):
        check_state_dict(w, missing, "/ckpt/1.7B")
    wrong = dict(sd, **{"talker.codec_head.weight": torch.empty(3000, 2048, device="meta")})
    with pytest.raises(CheckpointError, match=r"'talker\.codec_head\.weight' has shape \[3000, 2048\]"):
        check_state_dict(w, wrong, "/ckpt/1.7B")
    extra = dict(sd, **{"talker.surprise": torch.empty(1, device="meta")})
    with pytest.raises(CheckpointError, match="unexpected tensor 'talker.surprise'"):
        check_state_dict(w, extra, "/ckpt/1.7B")


def test_predictor_projection_only_when_widths_differ():
    assert "talker.code_predictor.small_to_mtp_projection.weight" not in _meta("0.6B").state_dict()
