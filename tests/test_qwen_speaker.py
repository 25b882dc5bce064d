"""ECAPA speaker encoder and its log-mel front end vs the official package; bad reference audio."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from support.audio_case import SR, audio_case, oracle_outputs
from voxcli.models.audio.mel import log_mel, slaney_mel_filters
from voxcli.models.base import CheckpointError, InputError
from voxcli.models.qwen3_tts.speaker_encoder import (
    SpeakerEncoder,
    SpeakerEncoderConfig,
)


@pytest.fixture(scope="module")
def encoder(audio_root) -> SpeakerEncoder:
    """Loaded through from_checkpoint from a minimal Base-style dir (config.json + model.safetensors)."""
    case = audio_case(audio_root)
    d = audio_root / "spk_ckpt"
    d.mkdir(exist_ok=True)
    (d / "config.json").write_text(json.dumps({"speaker_encoder_config": case.spk_config}))
    save_file(case.spk_state, str(d / "model.safetensors"))
    return SpeakerEncoder.from_checkpoint(d)


@pytest.mark.oracle
def test_mel_filters_match_librosa(audio_root):
    ref = oracle_outputs(audio_root)["mel_basis"].numpy()
    mine = slaney_mel_filters()
    assert mine.shape == ref.shape == (128, 513) and mine.dtype == np.float32
    assert np.abs(mine - ref).max() < 1e-7


@pytest.mark.oracle
def test_log_mel_matches_official(audio_root):
    ref = oracle_outputs(audio_root)["mel"]
    mine = log_mel(torch.from_numpy(audio_case(audio_root).ref)[None])
    assert mine.shape == ref.shape
    assert float((mine - ref).abs().max()) < 1e-5


@pytest.mark.oracle
def test_x_vector_matches_official(audio_root, encoder):
    ref = oracle_outputs(audio_root)["xvec"]
    mine = encoder.x_vector(audio_case(audio_root).ref)
    assert mine.shape == ref.shape == (64,)
    assert float(ref.abs().max()) > 0.1  # a live encoder
    assert float((mine - ref).abs().max()) < 1e-4


def test_bad_reference_audio_is_an_input_error(encoder):
    clip = np.zeros(SR, dtype=np.float32)
    with pytest.raises(InputError, match="empty"):
        encoder.x_vector(np.zeros(0, dtype=np.float32))
    with pytest.raises(InputError, match="resample it to 24000 Hz"):
        encoder.x_vector(clip, sample_rate=16000)
    with pytest.raises(InputError, match="mono"):
        encoder.x_vector(np.zeros((SR, 2), dtype=np.float32))
    with pytest.raises(InputError, match="too short"):
        encoder.x_vector(clip[:100])


def test_checkpoint_without_speaker_encoder(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3_tts"}))
    with pytest.raises(CheckpointError, match="speaker_encoder_config"):
        SpeakerEncoder.from_checkpoint(tmp_path)


def test_missing_speaker_tensor_names_key(audio_root, tmp_path):
    case = audio_case(audio_root)
    state = dict(case.spk_state)
    del state["speaker_encoder.fc.weight"]
    (tmp_path / "config.json").write_text(json.dumps({"speaker_encoder_config": case.spk_config}))
    save_file(state, str(tmp_path / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"speaker_encoder\.fc\.weight.*missing"):
        SpeakerEncoder.from_checkpoint(tmp_path)


def test_config_round_trip():
    cfg = SpeakerEncoderConfig(enc_dim=2048)
    assert SpeakerEncoderConfig.from_dict(cfg.to_dict()) == cfg
