"""Higgs Audio voice clone from a reference clip on our own tiny checkpoint (no oracle; parity with the
processor and the tokenizer's encode is in test_higgs_parity.py): `vox say --ref-audio --ref-text` end to
end, the clip's rate resampled, and the one-sentence refusals."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import soundfile as sf
from typer.testing import CliRunner
from voxcli.models.base import InputError, SamplingParams, SynthesisRequest


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    from voxcli.models.higgs_audio.tiny import build_tiny

    return build_tiny(tmp_path_factory.mktemp("higgs_clone") / "ckpt")


@pytest.fixture(scope="module")
def program(ckpt):
    from voxcli.models.higgs_audio.program import HiggsProgram

    return HiggsProgram.load(str(ckpt))


def _clip(n: int, rate: int = 24000) -> np.ndarray:
    t = np.arange(n) / rate
    rs = np.random.RandomState(0)
    return (0.2 * np.sin(2 * np.pi * 220 * t) + 0.02 * rs.randn(n)).astype(np.float32)


def _vox(*args: str):
    from voxcli.cli import app

    return CliRunner().invoke(app, list(args))


def test_vox_say_clones_from_a_clip_and_its_transcript(ckpt, program, tmp_path):
    from support.dia_driver import run_alone

    clip = _clip(30000)
    sf.write(tmp_path / "ref.wav", clip, 24000, subtype="FLOAT")
    out = tmp_path / "out.wav"
    args = ["say", "-m", str(ckpt), "Say this.", "--ref-audio", str(tmp_path / "ref.wav"), "-o", str(out)]
    r = _vox(*args, "--ref-text", "This is my voice.", "--greedy", "--max-frames", "12", "--quiet")
    assert r.exit_code == 0, r.output
    wav, sr = sf.read(out)
    assert sr == 24000 and wav.shape == (12 * 960,)
    # what the CLI ran is the clip's clone prompt: the same codes as the program given the same request
    req = SynthesisRequest(
        text="Say this.",
        ref_audio=clip,
        ref_sample_rate=24000,
        ref_text="This is my voice.",
        sampling=SamplingParams(greedy=True),
        max_frames=12,
    )
    prompt = program.prepare(req)
    assert prompt.data.audio_rows is not None and prompt.data.audio_rows.shape == (32 + 2 + 7, 8)
    codes = run_alone(program, prompt)
    plain = run_alone(program, program.prepare(SynthesisRequest(text="Say this.", max_frames=12,
                                                                sampling=SamplingParams(greedy=True))))
    assert codes.shape == plain.shape == (12, 8) and not np.array_equal(codes, plain)
    expected = program.codec_model.decode_offline(codes)
    assert np.abs(wav - expected).max() <= 1.5 / 32768  # the WAV is 16-bit


def test_other_sample_rates_are_resampled_to_the_tokenizer_rate(program):
    """A 16 kHz clip is encoded as the same clip resampled to 24 kHz by the tokenizer's own resampler."""
    import torch
    from voxcli.models.audio.resample import resample

    clip16 = _clip(16000, 16000)
    up = resample(torch.from_numpy(clip16), 16000, 24000).numpy()
    np.testing.assert_array_equal(program.reference_codes(clip16, 16000), program.reference_codes(up, 24000))
    assert program.reference_codes(clip16, 16000).shape == (25, 8)


def test_clone_refusals_are_one_sentence(ckpt, program, tmp_path):
    sf.write(tmp_path / "ref.wav", _clip(24000), 24000)
    base = ["say", "-m", str(ckpt), "Hi.", "-o", str(tmp_path / "o.wav")]
    r = _vox(*base, "--ref-audio", str(tmp_path / "ref.wav"))
    assert r.exit_code != 0 and "voice clone needs --ref-text" in r.output
    r = _vox(*base, "--ref-text", "words")
    assert r.exit_code != 0 and "--ref-text needs the reference clip" in r.output
    sf.write(tmp_path / "empty.wav", np.zeros(0, dtype=np.float32), 24000)
    r = _vox(*base, "--ref-audio", str(tmp_path / "empty.wav"), "--ref-text", "words")
    assert r.exit_code != 0 and "is empty" in r.output
    (tmp_path / "junk.wav").write_bytes(b"not audio at all")
    r = _vox(*base, "--ref-audio", str(tmp_path / "junk.wav"), "--ref-text", "words")
    assert r.exit_code != 0 and "cannot read reference audio" in r.output
    with pytest.raises(InputError, match="needs at least 40 ms"):
        program.prepare(
            SynthesisRequest(text="Hi.", ref_audio=_clip(500), ref_sample_rate=24000, ref_text="a")
        )
    with pytest.raises(InputError, match="mono"):
        program.check(SynthesisRequest(text="Hi.", ref_audio=np.zeros((2, 100)), ref_sample_rate=24000,
                                       ref_text="a"))


def test_a_tokenizer_without_its_encoder_is_named(ckpt, tmp_path):
    """Our v3 builder and older tiny checkpoints carry the decode half only: the clone names the file."""
    from safetensors.torch import load_file, save_file
    from voxcli.models.base import CheckpointError
    from voxcli.models.higgs_audio.encoder import HiggsEncoder

    tok = tmp_path / "tok"
    shutil.copytree(ckpt / "audio_tokenizer", tok)
    sd = load_file(str(tok / "model.safetensors"))
    kept = {k: v for k, v in sd.items() if not k.startswith("semantic_model.")}
    save_file(kept, str(tok / "model.safetensors"))
    with pytest.raises(CheckpointError, match=r"model\.safetensors has no semantic_model tensors"):
        HiggsEncoder.load(tok)
    d = json.loads((ckpt / "audio_tokenizer" / "config.json").read_text())
    d["semantic_model_config"]["do_stable_layer_norm"] = True
    (tok / "config.json").write_text(json.dumps(d))
    with pytest.raises(CheckpointError, match="semantic_model_config.do_stable_layer_norm"):
        HiggsEncoder.load(tok)


def test_v3_refuses_a_clip_clearly(tmp_path):
    from voxcli.models.higgs_audio.program import HiggsProgram
    from voxcli.models.higgs_audio.tiny import build_tiny_v3

    v3 = HiggsProgram.load(str(build_tiny_v3(tmp_path / "v3")))
    with pytest.raises(InputError, match="voice clone with Higgs Audio v3 is not implemented"):
        v3.prepare(SynthesisRequest(text="Hi.", ref_audio=_clip(24000), ref_sample_rate=24000, ref_text="a"))
